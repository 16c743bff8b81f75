// Tensor-parallel layers (Megatron-LM, Shoeybi et al. 2019; seed 000's "split
// W along its columns"): a Linear split over the t ranks of a tensor-parallel
// group, and the conjugate operators that keep forward and backward exact:
//   f = copy_to_tensor_parallel:     forward identity,   backward all-reduce;
//   g = reduce_from_tensor_parallel: forward all-reduce, backward identity.
// A column-parallel Linear holds rows [k out/t, (k+1) out/t) of the weight
// (and that slice of the bias) on tp rank k and takes f(x): each rank makes
// its slice of the output. A row-parallel Linear holds columns
// [k in/t, (k+1) in/t), takes that slice of its input (a column-parallel
// layer's output) and returns g(x_k W_k^T) + bias: the whole output on every
// rank. Column then row (an MLP, or attention's QKV and output projection)
// costs one all-reduce forward and one backward.
//
// Both are built from the full layer's weight and bias, so that t ranks start
// exactly where one device does (the caller seeds and builds the full layer;
// each rank keeps its slice). The all-reduces run on `group` (TpGroup below),
// a communicator of the t ranks that the modules share the ownership of.
//
// baton::Pipeline applies them with PipelineOptions::tp (tensor_parallel()
// below): every TransformerBlock layer is split, the other layers are whole on
// every tp rank.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <memory>

#include "baton/comm/communicator.h"
#include "baton/nn/layer_spec.h"
#include "baton/nn/tensor_split.h"
#include "baton/nn/transformer.h"

namespace baton::nn {

// A tensor-parallel group: this rank is share group->rank() of
// group->world_size(). Never null; a solo communicator (comm::solo) for one
// share. The layers hold it, so it lives as long as they do.
using TpGroup = std::shared_ptr<comm::Communicator>;

// f: identity forward; the gradient is summed over `group` in backward.
torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, const TpGroup& group);
// g: `x` summed over `group` in forward; identity backward.
torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, const TpGroup& group);

// Both keep only their slice (copies, cut by take_slice): the full tensors
// they were built from can be freed. weight_split() and bias_split() say how
// (tensor_split.h), for whatever puts the whole layer back together.
class ColumnParallelLinearImpl : public torch::nn::Module {
 public:
  // `weight` [out, in] and `bias` [out] (may be undefined) of the full layer;
  // this rank keeps rows of slice group->rank() of group->world_size(), of
  // each of `parts` equal blocks of rows when the layer fuses several (QKV:
  // 3). Throws baton::Error when parts x size does not divide out.
  ColumnParallelLinearImpl(const torch::Tensor& weight, const torch::Tensor& bias, TpGroup group,
                           int parts = 1);
  // x [..., in] -> this rank's slice of the output [..., out / size].
  torch::Tensor forward(const torch::Tensor& x);
  TensorSplit weight_split() const { return {0, parts_}; }
  TensorSplit bias_split() const { return {0, parts_}; }

  torch::Tensor weight, bias;

 private:
  TpGroup group_;
  int parts_;
};
TORCH_MODULE(ColumnParallelLinear);

class RowParallelLinearImpl : public torch::nn::Module {
 public:
  // `weight` [out, in] and `bias` [out] of the full layer; this rank keeps
  // columns of slice group->rank() of group->world_size() and the whole
  // bias. Throws baton::Error when the size does not divide in.
  RowParallelLinearImpl(const torch::Tensor& weight, const torch::Tensor& bias, TpGroup group);
  // x [..., in / size] (this rank's slice) -> the whole output [..., out].
  torch::Tensor forward(const torch::Tensor& x);
  // The bias is whole on every rank.
  TensorSplit weight_split() const { return {1, 1}; }

  torch::Tensor weight, bias;

 private:
  TpGroup group_;
};
TORCH_MODULE(RowParallelLinear);

// A gpt TransformerBlock split over t ranks as Megatron splits it: each rank
// computes heads/t of the attention heads (its q, k and v rows of the fused
// QKV projection, column-parallel in 3 blocks) and feeds them to its columns of the
// output projection (row-parallel); the MLP's first Linear is column- and its
// second row-parallel (4h/t hidden units each). The LayerNorms are whole on
// every rank. Two all-reduces forward (after attention and after the MLP) and
// two backward. Built from a one-device block: t ranks start where it does.
// Throws baton::Error unless t divides the heads (and so the 4h units).
class TensorParallelBlockImpl : public torch::nn::Module {
 public:
  TensorParallelBlockImpl(const TransformerBlock& full, const TpGroup& group);
  // x [batch, time, hidden] (the same on every rank) -> the block's output, whole on every rank.
  torch::Tensor forward(const torch::Tensor& x);

  int64_t local_heads = 0, head_dim = 0;
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  ColumnParallelLinear qkv{nullptr}, fc1{nullptr};
  RowParallelLinear proj{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TensorParallelBlock);

// `spec` with every layer that builds a TransformerBlock built whole (the same
// seeded draw as on one device) and then split as this rank's share of
// `group`; other layers unchanged (whole on every tp rank: their inputs
// and gradients are the same on all of them, so they stay equal without
// communication). A model without blocks is then replicated t times.
ModelSpec tensor_parallel(const ModelSpec& spec, const TpGroup& group);

}  // namespace baton::nn
