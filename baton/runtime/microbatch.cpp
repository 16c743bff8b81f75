#include "baton/runtime/microbatch.h"

#include <algorithm>

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

namespace {

bool is_whole(const std::vector<int>& whole, size_t index) {
  return std::find(whole.begin(), whole.end(), static_cast<int>(index)) != whole.end();
}

}  // namespace

int64_t batch_rows(const nn::Tensors& batch, const std::vector<int>& whole) {
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!is_whole(whole, i) && batch[i].defined() && batch[i].dim() >= 1) return batch[i].size(0);
  }
  return -1;
}

std::vector<nn::Tensors> split_inputs(const nn::Tensors& batch, int microbatches,
                                      const std::vector<int>& whole) {
  BATON_CHECK(!batch.empty(), "[runtime.microbatch] the model's inputs are an empty list");
  for (int w : whole) {
    BATON_CHECK(w >= 0 && static_cast<size_t>(w) < batch.size(),
                "[runtime.microbatch] whole input ", w, " is not among the model's ", batch.size(),
                " inputs");
  }
  std::vector<nn::Tensors> out(static_cast<size_t>(std::max(microbatches, 0)));
  int64_t rows = -1;
  size_t first = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const torch::Tensor& t = batch[i];
    BATON_CHECK(t.defined(), "[runtime.microbatch] input ", i, " of the model is undefined");
    if (is_whole(whole, i)) {
      for (auto& mb : out) mb.push_back(t);
      continue;
    }
    BATON_CHECK(t.dim() >= 1, "[runtime.microbatch] input ", i,
                " has no dim 0 to cut into micro-batches (a scalar); declare it whole "
                "(PipelineOptions::whole_inputs) so every micro-batch shares it");
    if (rows < 0) {
      rows = t.size(0);
      first = i;
    }
    BATON_CHECK(t.size(0) == rows, "[runtime.microbatch] input ", i, " has ", t.size(0),
                " rows on dim 0 but input ", first, " has ", rows,
                ": the inputs cut into micro-batches must agree on dim 0; declare a shared one "
                "whole (PipelineOptions::whole_inputs)");
    std::vector<torch::Tensor> parts = split_microbatches(t, microbatches);
    for (size_t k = 0; k < out.size(); ++k) out[k].push_back(parts[k]);
  }
  return out;
}

std::vector<double> loss_scales(const std::vector<torch::Tensor>& microbatches) {
  int64_t total = 0;
  for (const auto& mb : microbatches) total += mb.size(0);
  std::vector<double> scales;
  for (const auto& mb : microbatches) scales.push_back(static_cast<double>(mb.size(0)) / total);
  return scales;
}

}  // namespace baton::runtime
