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
// A region ending in a product (attention's P V) can say so with
// recomputed_product, whose backward does not run the product again.
//
// The region must be a function of its inputs alone (no parameters, no
// randomness: a dropout would need its generator's state replayed) and
// return one tensor. gpt's and llama's blocks (and their tensor-parallel
// forms) mark their attention core with recomputed_product.
#pragma once

#include <torch/types.h>

#include <functional>
#include <vector>

namespace baton::nn {

using Region = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

// region(inputs), kept as its inputs only when selective recomputation is
// on for this thread and autograd records; else region(inputs) as it is.
torch::Tensor recomputed_region(const Region& region, const std::vector<torch::Tensor>& inputs);

// probabilities(inputs).matmul(values), as attention's core ends: a region
// whose last step is a product with `values`. Recomputed as
// recomputed_region is, except that its backward runs only
// probabilities(inputs) again and differentiates the product by hand, as
// autograd's matmul does (the same bmm calls on the same operands, so the
// gradients are bitwise the plain region's): the product's output is not
// needed for its backward, so the product is not run twice. Under autocast
// the whole region is recomputed (the product's casts would have to be
// replayed).
// REQUIRES: probabilities(inputs) [..., T, S] and values [..., S, d] with the
// same leading sizes.
torch::Tensor recomputed_product(const Region& probabilities,
                                 const std::vector<torch::Tensor>& inputs,
                                 const torch::Tensor& values);

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
