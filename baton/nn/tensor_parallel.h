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
// below): every gpt TransformerBlock and Llama LlamaBlock layer is split, so
// is every layer whose LayerSpec says how (the mlp's Linear pairs), the other
// layers are whole on every tp rank.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <memory>

#include "baton/comm/communicator.h"
#include "baton/nn/chain.h"
#include "baton/nn/layer_call.h"
#include "baton/nn/layer_spec.h"
#include "baton/nn/llama.h"
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

// A LlamaBlock split over t ranks the same way: heads/t per rank (its rows of
// wq, wk and wv, column-parallel; rotary and attention on its heads alone),
// wo row-parallel; SwiGLU's gate and up column-parallel (ffn/t units each),
// down row-parallel; the RMSNorms whole. Two all-reduces forward, two
// backward; positions and mask pass through untouched. Throws baton::Error
// unless t divides the heads and the SwiGLU width.
class TensorParallelLlamaBlockImpl : public torch::nn::Module {
 public:
  TensorParallelLlamaBlockImpl(const LlamaBlock& full, const TpGroup& group);
  // {x [batch, time, hidden] (the same on every rank), positions[, mask]} ->
  // {the block's output, whole on every rank, positions[, mask]}.
  Tensors forward(Tensors input);

  int64_t local_heads = 0, head_dim = 0;
  RmsNorm attention_norm{nullptr}, ffn_norm{nullptr};
  ColumnParallelLinear wq{nullptr}, wk{nullptr}, wv{nullptr}, gate{nullptr}, up{nullptr};
  RowParallelLinear wo{nullptr}, down{nullptr};
};
TORCH_MODULE(TensorParallelLlamaBlock);

// Megatron's MLP pair cut across two pipeline layers (the mlp zoo model:
// layers 2i and 2i + 1 are a pair). Each layer is a Chain whose first part is
// a Linear and whose other parts are pointwise (ReLU).
// - kColumn: the Linear column-parallel, the other parts on this rank's
//   slice; its output crosses to the next layer at the whole width, this
//   rank's slice filled and zeros elsewhere. So wherever stage boundaries
//   fall, the pair stays exact: within a stage the row layer reads its slice,
//   and across one the executor's scatter sends exactly that slice (or, with
//   scatter/gather off, the padded whole from the same tp index).
// - kRow: reads its slice of that input, the Linear row-parallel (one
//   all-reduce), then the other parts on the whole output.
// The parameters keep the chain's names ("0.weight").
enum class LinearCut { kColumn, kRow };

class TensorParallelChainImpl : public torch::nn::Module {
 public:
  // Throws baton::Error when `whole`'s first part is no baton Linear or t does
  // not divide the split features.
  TensorParallelChainImpl(const Chain& whole, LinearCut cut, const TpGroup& group);
  // kColumn: x [..., in], whole -> [..., out], as described above.
  // kRow: x [..., in], as a kColumn layer returns it -> [..., out], whole.
  torch::Tensor forward(const torch::Tensor& x);

  LinearCut cut;
  ColumnParallelLinear column{nullptr};
  RowParallelLinear row{nullptr};

 private:
  TpGroup group_;
  std::vector<torch::nn::AnyModule> pointwise_;
};
TORCH_MODULE(TensorParallelChain);

// For LayerSpec::split: a Chain layer as TensorParallelChain(chain, cut, group).
torch::nn::AnyModule split_linear_chain(const torch::nn::AnyModule& whole, const TpGroup& group,
                                        LinearCut cut);

// `spec` with every layer built whole (the same seeded draw as on one device)
// and then, as this rank's share of `group`: split by its LayerSpec::split
// when it has one, else split when it builds a TransformerBlock or a
// LlamaBlock, else unchanged (whole on every tp rank: their inputs and
// gradients are the same on all of them, so they stay equal without
// communication). A model with nothing to split is then replicated t times.
ModelSpec tensor_parallel(const ModelSpec& spec, const TpGroup& group);

}  // namespace baton::nn
