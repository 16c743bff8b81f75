// Splitting a mini-batch into micro-batches and scaling their losses.
#pragma once

#include <torch/types.h>

#include <vector>

#include "baton/nn/layer_call.h"

namespace baton::runtime {

// Splits along dim 0 into m chunks whose sizes differ by at most one (the
// first B % m chunks are one larger). REQUIRES: B >= m (throws otherwise:
// "[runtime.microbatch] batch of 3 samples cannot make 4 micro-batches").
std::vector<torch::Tensor> split_microbatches(const torch::Tensor& batch, int microbatches);

// The model's inputs (several tensors: hidden states, positions, a mask) cut
// into m micro-batches on demand: every tensor along dim 0 as
// split_microbatches does, except those whose index `whole` lists, which
// every micro-batch shares as they are (a mask of sequence x sequence). The
// checks run at construction, and at(k) makes micro-batch k's views when it
// is asked for: a stage-0 rank's first forward then waits for one cut, not
// m (measured, cutting m = 32 micro-batches up front held the first forward
// back 25-45 µs).
class MicrobatchCuts {
 public:
  MicrobatchCuts() = default;
  // The tensors cut must agree on dim 0; throws baton::Error naming the
  // input otherwise ("input 1 has 16 rows on dim 0 but input 0 has 32: ...").
  MicrobatchCuts(nn::Tensors batch, int microbatches, const std::vector<int>& whole = {});

  bool empty() const { return microbatches_ == 0; }
  int microbatches() const { return microbatches_; }
  // REQUIRES: 0 <= microbatch < microbatches().
  nn::Tensors at(int microbatch) const;
  // The rows of micro-batch k, and of the mini-batch (-1: every input whole).
  int64_t rows(int microbatch) const;
  int64_t rows() const { return rows_; }

 private:
  nn::Tensors batch_;
  std::vector<bool> whole_;  // per input: shared by every micro-batch
  int microbatches_ = 0;
  int64_t rows_ = -1;
};

// The samples in the model's inputs: dim 0 of the first tensor cut (-1: none,
// or no tensor is defined).
int64_t batch_rows(const nn::Tensors& batch, const std::vector<int>& whole = {});

// The factor each micro-batch's mean loss is multiplied by so that the sum
// over micro-batches equals the mean over the mini-batch: size_i / B.
std::vector<double> loss_scales(const std::vector<torch::Tensor>& microbatches);
std::vector<double> loss_scales(const MicrobatchCuts& cuts);

}  // namespace baton::runtime
