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
// into m micro-batches: every tensor along dim 0 as split_microbatches does,
// except those whose index `whole` lists, which every micro-batch shares
// as they are (a mask of sequence x sequence). The tensors cut must agree on
// dim 0; throws baton::Error naming the input otherwise ("input 1 has 16 rows
// on dim 0 but input 0 has 32: ...").
std::vector<nn::Tensors> split_inputs(const nn::Tensors& batch, int microbatches,
                                      const std::vector<int>& whole = {});

// The samples in the model's inputs: dim 0 of the first tensor cut (-1: none,
// or no tensor is defined).
int64_t batch_rows(const nn::Tensors& batch, const std::vector<int>& whole = {});

// The factor each micro-batch's mean loss is multiplied by so that the sum
// over micro-batches equals the mean over the mini-batch: size_i / B.
std::vector<double> loss_scales(const std::vector<torch::Tensor>& microbatches);

}  // namespace baton::runtime
