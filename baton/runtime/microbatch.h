// Splitting a mini-batch into micro-batches and scaling their losses.
#pragma once

#include <torch/types.h>

#include <vector>

namespace baton::runtime {

// Splits along dim 0 into m chunks whose sizes differ by at most one (the
// first B % m chunks are one larger). REQUIRES: B >= m (throws otherwise:
// "[runtime.microbatch] batch of 3 samples cannot make 4 micro-batches").
std::vector<torch::Tensor> split_microbatches(const torch::Tensor& batch, int microbatches);

// The factor each micro-batch's mean loss is multiplied by so that the sum
// over micro-batches equals the mean over the mini-batch: size_i / B.
std::vector<double> loss_scales(const std::vector<torch::Tensor>& microbatches);

}  // namespace baton::runtime
