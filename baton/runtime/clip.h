// The global gradient norm and the clip by it (the CLIP_NORM action,
// schedule/clip_norm.h; Pipeline::clip_grad_norm).
//
// The norm is that of the model's gradient as one device holds it: every
// parameter exactly once. Each rank adds the squares of the gradients it
// owns and the world sums the shares (one all-reduce of one number). A rank
// owns:
//  - nothing when it is not replica 0 of its dp group: after REDUCE_GRAD
//    every replica holds the same mean, which counts once;
//  - a stage's gradients only on the lowest of the ranks computing it (a
//    stage replicated, as in Chimera, counts once);
//  - a tied weight's gradient only in its copy on the tie's lowest stage
//    (after REDUCE_TIED every copy holds the sum);
//  - a tensor-parallel slice on every tp rank (the slices' squares add up to
//    the whole's), a parameter whole on every tp rank (a norm's weight, a
//    row-parallel layer's bias) only on tp rank 0.
// Under ZeRO-2/3 (`zero` given, stage 2 or 3) a rank holds its shard of each
// gradient instead: every replica then adds the squares of its shards of the
// gradients it would own (the shards' squares add up to the whole's).
// Every rank then scales all of its gradients (copies and replicas too) by
// min(1, max / (norm + 1e-6)), torch.nn.utils.clip_grad_norm_'s factor, so
// the copies stay identical. A norm that is not finite scales nothing: the
// caller skips the step (the trainer does, with one warning line).
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <vector>

#include "baton/comm/rank_layout.h"
#include "baton/runtime/reducers.h"
#include "baton/runtime/stage.h"
#include "baton/runtime/zero.h"
#include "baton/schedule/schedule.h"

namespace baton::runtime {

class NormClipper {
 public:
  // `tied`: the copies of each tied weight, as the executor is given them.
  NormClipper(const schedule::Placement& placement, const comm::RankLayout& layout,
              const std::map<int, std::shared_ptr<Stage>>& stages,
              const std::vector<std::vector<TiedCopy>>& tied, const ZeroShards* zero = nullptr);

  // The global L2 norm of the gradients (a collective over the world: every
  // rank calls it at the same point), after scaling them so that it is at
  // most `max_norm` (infinite: measure only). Gradients not yet made count
  // as zero. `unscale`: the gradients are the loss scale's multiple (fp16),
  // divided by it here too. Returns the norm before the clip (unscaled).
  double clip(double max_norm, const std::string& what = "CLIP_NORM", double unscale = 1.0);

 private:
  std::vector<torch::Tensor> owned_;  // the parameters whose gradients count here
  std::vector<torch::Tensor> all_;    // every parameter of this rank's stages
  std::shared_ptr<comm::Communicator> world_;
};

}  // namespace baton::runtime
