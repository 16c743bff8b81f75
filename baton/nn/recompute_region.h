// Selective recomputation (Korthikanti et al. 2022; Megatron's
// --recompute-granularity selective): a layer marks a region of its forward
// whose tensors are cheap to recompute but costly to keep, as attention's
// scores and softmax (s^2 per head). Under `--recompute selective`
// (runtime::Recompute::Selective) the region keeps only its inputs and runs
// again in the backward; otherwise it runs as written. Its outputs and its
// inputs' gradients are bitwise those of the plain region.
//
//   torch::Tensor mixed = baton::nn::recomputed_region(
//       [](const std::vector<torch::Tensor>& in) {
//         return in[0].matmul(in[1].transpose(-2, -1)).softmax(-1).matmul(in[2]);
//       },
//       {q, k, v});
//
// The region must be a function of its inputs alone (no parameters, no
// randomness: a dropout would need its generator's state replayed) and
// return one tensor. gpt's and llama's blocks (and their tensor-parallel
// forms) mark their attention core.
#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

namespace baton::nn {

using Region = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// region(inputs), kept as its inputs only when selective recomputation is
// on for this thread and autograd records; else region(inputs) as it is.
torch::Tensor recomputed_region(const Region& region, const std::vector<torch::Tensor>& inputs);

// Selective recomputation on (or off) for this thread while alive; the
// executor opens one around each training forward.
class SelectiveRecomputeScope {
 public:
  explicit SelectiveRecomputeScope(bool on);
  ~SelectiveRecomputeScope();
  SelectiveRecomputeScope(const SelectiveRecomputeScope&) = delete;
  SelectiveRecomputeScope& operator=(const SelectiveRecomputeScope&) = delete;

 private:
  bool previous_;
};

bool selective_recompute_on();

}  // namespace baton::nn
