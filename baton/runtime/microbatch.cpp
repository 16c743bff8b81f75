#include "baton/runtime/microbatch.h"

#include "baton/core/error.h"

namespace baton::runtime {

std::vector<torch::Tensor> split_microbatches(const torch::Tensor& batch, int microbatches) {
  BATON_CHECK(microbatches >= 1, "[runtime.microbatch] micro-batches must be at least 1, got ",
              microbatches);
  BATON_CHECK(batch.dim() >= 1, "[runtime.microbatch] a batch needs a batch dimension (dim 0)");
  const int64_t n = batch.size(0);
  BATON_CHECK(n >= microbatches, "[runtime.microbatch] batch of ", n, " samples cannot make ",
              microbatches, " micro-batches; use a batch of at least ", microbatches,
              " or fewer micro-batches");
  return batch.tensor_split(microbatches, 0);
}

std::vector<double> loss_scales(const std::vector<torch::Tensor>& microbatches) {
  int64_t total = 0;
  for (const auto& mb : microbatches) total += mb.size(0);
  std::vector<double> scales;
  for (const auto& mb : microbatches) scales.push_back(static_cast<double>(mb.size(0)) / total);
  return scales;
}

}  // namespace baton::runtime
