// ZeRO stages 1-3 on real tensors: the runtime side of the UNSHARD, RESHARD
// and REDUCE_SCATTER actions (schedule/sharding.h places them).
//
// Each parameter of this rank's stages is cut flat into dp chunks of c =
// ceil(n / dp) elements; replica d owns elements [d c, min(n, (d + 1) c)),
// possibly none. Its shard is a leaf tensor of those elements that the
// caller's optimizer steps (Pipeline::parameters()): under ZeRO-1 and 2 a
// view of the parameter (the optimizer writes the replica's part in place),
// under ZeRO-3 a tensor of its own, the parameter itself holding nothing
// between a RESHARD and the next UNSHARD. Adam, AdamW and SGD are
// elementwise, so stepping the shards is stepping the whole parameter.
//
//  - UNSHARD (start_unshard, then finish_unshard before the stage's first
//    compute) all-gathers each replica's chunks, padded to c, in one message
//    per dtype, and writes them into the parameters (allocating them again
//    under ZeRO-3).
//  - RESHARD (ZeRO-3) frees the gathered parameters (Tensor::set_data to an
//    empty tensor; autograd's saved references are gone after the last
//    backward).
//  - REDUCE_SCATTER (start_scatter): the bucket's gradients, divided by dp
//    and laid out replica by replica (each member's chunk, padded to c), are
//    reduce-scattered over the dp group (Gloo's, LibTorch 2.x), and the whole
//    gradients are freed at once; once it is waited for, slice_gradients()
//    hands each shard its part. Where the group has no reduce-scatter
//    (LibTorch 1.13) and for a stage whose tied copies REDUCE_TIED still sums
//    (`deferred`), REDUCE_GRAD's all-reduce of the whole gradients runs
//    instead (note_scattered), sliced once it is done (all_reduces()).
// Gradients do not accumulate across steps under ZeRO: each step's shard
// gradients are that step's (the whole ones start undefined every step).
// So at rest every ZeRO stage holds 1/dp of the gradients; ZeRO-2/3 also
// free a stage's whole ones as soon as its REDUCE_SCATTERs are waited for
// (at a REDUCE_TIED, the CLIP_NORM or the step's end), ZeRO-1 at the end.
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/runtime/stage.h"

namespace baton::runtime {

class ZeroShards {
 public:
  // `zero` 1-3 over `dp_group` (one replica: every shard is the whole
  // parameter). `deferred`: stages whose gradients another action still sums
  // after their reduction (a REDUCE_TIED on this rank), sliced only by
  // slice_gradients(true). Under ZeRO-3 the parameters are freed at once.
  // Throws baton::Error for a parameter that is not contiguous.
  ZeroShards(int zero, const std::map<int, std::shared_ptr<Stage>>& stages,
             std::shared_ptr<comm::Communicator> dp_group, std::set<int> deferred);

  int zero() const { return zero_; }
  // Every shard this replica steps, in the stages' parameter order.
  const std::vector<torch::Tensor>& shards() const { return all_shards_; }
  // The shard of a stage parameter (by identity); undefined when none.
  torch::Tensor shard_of(const torch::Tensor& parameter) const;
  // Where that shard lies: the parameter's shape and this replica's elements
  // [begin, begin + length) of it flat (all 0 when it is none of the stages').
  struct Place {
    std::vector<int64_t> sizes;
    int64_t begin = 0, length = 0;
  };
  Place place_of(const torch::Tensor& parameter) const;
  // ZeRO-3: each shard set from its parameter's whole value (after a load
  // wrote the parameters; ZeRO-1/2 shards are views of them already).
  void refresh_shards();

  // UNSHARD of `stage`: starts its all-gather. finish_unshard waits for a
  // started one (nothing when none is pending) and writes the parameters.
  void start_unshard(int stage);
  void finish_unshard(int stage);
  // Whether `stage` has an UNSHARD started and not yet finished.
  bool unsharding(int stage) const { return pending_.count(stage) > 0; }
  // RESHARD (ZeRO-3): frees `stage`'s gathered parameters.
  void reshard(int stage);
  // Every stage gathered now (eval, save, the parameters read between steps)
  // and, under ZeRO-3, freed again by reshard_all().
  void gather_all();
  void reshard_all();

  // Whether `stage`'s REDUCE_SCATTER runs as REDUCE_GRAD's all-reduce of the
  // whole gradients, sliced afterwards: when REDUCE_TIED still sums them, and
  // where the dp group has no reduce-scatter (LibTorch 1.13's Gloo: the
  // all-reduce of the same buckets as ZeRO-0 gives its sums bit for bit, and
  // a reduce-scatter's input would take the memory the gradients free).
  bool all_reduces(int stage) const {
    return deferred_.count(stage) > 0 || !dp_->has_reduce_scatter();
  }
  // REDUCE_SCATTER of `members` (indices into Stage::parameters()) of a
  // stage that is not deferred: starts the reduce-scatter (above) and frees
  // the whole gradients. Its parts reach the shards at slice_gradients(),
  // after the handle was waited for.
  comm::ReduceHandle start_scatter(int stage, const std::vector<int>& members,
                                   const std::string& what);
  // A deferred stage's REDUCE_SCATTER, run as REDUCE_GRAD's all-reduce:
  // `members` wait for slice_gradients(true) once it is done.
  void note_scattered(int stage, const std::vector<int>& members);
  // ZeRO-2/3: each noted parameter's gradient slice becomes its shard's
  // gradient and the whole gradient is freed (a deferred stage's only with
  // `deferred_too`). ZeRO-1 (only with `deferred_too`, once the step's
  // reductions are done): the same for every parameter.
  void slice_gradients(bool deferred_too);
  // The whole gradients and the shards' dropped (before a step: they never
  // accumulate, and the step cuts the shards' anew).
  void clear_gradients();

 private:
  struct Piece {
    torch::Tensor parameter;
    torch::Tensor shard;
    std::vector<int64_t> sizes;  // the parameter's shape
    int64_t numel = 0, chunk = 0, begin = 0, length = 0;
  };

  int zero_;
  std::shared_ptr<comm::Communicator> dp_;
  int dp_size_, dp_rank_;
  std::set<int> deferred_;
  std::map<int, std::vector<Piece>> pieces_;  // per stage, in Stage::parameters() order
  std::vector<torch::Tensor> all_shards_;
  // Per stage: the all-gathers in flight (one per dtype) and their dtypes' pieces.
  std::map<int, std::vector<std::pair<std::vector<size_t>, comm::GatherHandle>>> pending_;
  std::vector<std::pair<int, int>> scattered_;  // (stage, piece) awaiting their slice
  // Reduce-scatters started: the stage, its members, the buffer of this
  // replica's chunks that the wait fills.
  struct Scatter {
    int stage;
    std::vector<int> members;
    torch::Tensor chunks;
  };
  std::vector<Scatter> scatters_;
};

}  // namespace baton::runtime
