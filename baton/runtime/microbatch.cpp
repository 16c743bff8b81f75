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

MicrobatchCuts::MicrobatchCuts(nn::Tensors batch, int microbatches, const std::vector<int>& whole)
    : batch_(std::move(batch)), whole_(batch_.size(), false), microbatches_(microbatches) {
  BATON_CHECK(!batch_.empty(), "[runtime.microbatch] the model's inputs are an empty list");
  BATON_CHECK(microbatches >= 1, "[runtime.microbatch] micro-batches must be at least 1, got ",
              microbatches);
  for (int w : whole) {
    BATON_CHECK(w >= 0 && static_cast<size_t>(w) < batch_.size(),
                "[runtime.microbatch] whole input ", w, " is not among the model's ", batch_.size(),
                " inputs");
    whole_[static_cast<size_t>(w)] = true;
  }
  size_t first = 0;
  for (size_t i = 0; i < batch_.size(); ++i) {
    const torch::Tensor& t = batch_[i];
    BATON_CHECK(t.defined(), "[runtime.microbatch] input ", i, " of the model is undefined");
    if (whole_[i]) continue;
    BATON_CHECK(t.dim() >= 1, "[runtime.microbatch] input ", i,
                " has no dim 0 to cut into micro-batches (a scalar); declare it whole "
                "(PipelineOptions::whole_inputs) so every micro-batch shares it");
    if (rows_ < 0) {
      rows_ = t.size(0);
      first = i;
    }
    BATON_CHECK(t.size(0) == rows_, "[runtime.microbatch] input ", i, " has ", t.size(0),
                " rows on dim 0 but input ", first, " has ", rows_,
                ": the inputs cut into micro-batches must agree on dim 0; declare a shared one "
                "whole (PipelineOptions::whole_inputs)");
  }
  BATON_CHECK(rows_ < 0 || rows_ >= microbatches, "[runtime.microbatch] batch of ", rows_,
              " samples cannot make ", microbatches, " micro-batches; use a batch of at least ",
              microbatches, " or fewer micro-batches");
}

int64_t MicrobatchCuts::rows(int microbatch) const {
  BATON_ASSERT(microbatch >= 0 && microbatch < microbatches_, "micro-batch ", microbatch, " of ",
               microbatches_);
  if (rows_ < 0) return -1;
  // tensor_split's sizes: the first rows % m micro-batches one row larger.
  return rows_ / microbatches_ + (microbatch < rows_ % microbatches_ ? 1 : 0);
}

nn::Tensors MicrobatchCuts::at(int microbatch) const {
  const int64_t base = rows_ / microbatches_, extra = rows_ % microbatches_;
  const int64_t begin = microbatch * base + std::min<int64_t>(microbatch, extra);
  const int64_t length = rows(microbatch);
  nn::Tensors out;
  out.reserve(batch_.size());
  for (size_t i = 0; i < batch_.size(); ++i)
    out.push_back(whole_[i] ? batch_[i] : batch_[i].narrow(0, begin, length));
  return out;
}

std::vector<double> loss_scales(const MicrobatchCuts& cuts) {
  std::vector<double> scales;
  for (int k = 0; k < cuts.microbatches(); ++k)
    scales.push_back(static_cast<double>(cuts.rows(k)) / static_cast<double>(cuts.rows()));
  return scales;
}

std::vector<double> loss_scales(const std::vector<torch::Tensor>& microbatches) {
  int64_t total = 0;
  for (const auto& mb : microbatches) total += mb.size(0);
  std::vector<double> scales;
  for (const auto& mb : microbatches) scales.push_back(static_cast<double>(mb.size(0)) / total);
  return scales;
}

}  // namespace baton::runtime
