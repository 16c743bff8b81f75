#include "baton/nn/tensor_parallel.h"

#include <torch/autograd.h>
#include <torch/nn/functional/linear.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "baton/core/error.h"

namespace baton::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group as an autograd context keeps it for the backward: a capsule
// (an IValue that holds any CustomClassHolder) that shares its ownership.
struct GroupCapsule : torch::CustomClassHolder {
  explicit GroupCapsule(TpGroup g) : group(std::move(g)) {}
  TpGroup group;
};

TpGroup group_of(AutogradContext* ctx) {
  const c10::intrusive_ptr<torch::CustomClassHolder> capsule = ctx->saved_data["group"].toCapsule();
  return static_cast<GroupCapsule*>(capsule.get())->group;
}

torch::Tensor summed(const torch::Tensor& x, comm::Communicator& group, const char* what) {
  std::vector<torch::Tensor> t{x.contiguous().clone()};
  group.all_reduce_sum(t, what);
  return t[0];
}

struct CopyToTensorParallel : torch::autograd::Function<CopyToTensorParallel> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const TpGroup& group) {
    ctx->saved_data["group"] = c10::IValue::make_capsule(c10::make_intrusive<GroupCapsule>(group));
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {summed(grad[0], *group_of(ctx), "the tensor-parallel input gradient (f backward)"),
            torch::Tensor()};
  }
};

struct ReduceFromTensorParallel : torch::autograd::Function<ReduceFromTensorParallel> {
  static torch::Tensor forward(AutogradContext*, const torch::Tensor& x, const TpGroup& group) {
    return summed(x, *group, "the tensor-parallel output (g forward)");
  }
  static variable_list backward(AutogradContext*, variable_list grad) {
    return {grad[0], torch::Tensor()};
  }
};

void check_split(const char* layer, const char* dimension, int64_t size_of_dim, int rank, int size,
                 int parts = 1) {
  BATON_CHECK(size >= 1 && rank >= 0 && rank < size, "[nn.", layer, "] tensor-parallel rank ", rank,
              " of ", size, " is out of range");
  BATON_CHECK(parts >= 1 && size_of_dim % (parts * size) == 0, "[nn.", layer, "] tp=", size,
              " must divide the ", dimension, " features (", size_of_dim,
              parts > 1 ? ::baton::detail::concat(" in ", parts, " blocks") : "", ")");
}

}  // namespace

torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, const TpGroup& group) {
  if (group->world_size() == 1) return x;
  return CopyToTensorParallel::apply(x, group);
}

torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, const TpGroup& group) {
  if (group->world_size() == 1) return x;
  return ReduceFromTensorParallel::apply(x, group);
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const torch::Tensor& full_weight,
                                                   const torch::Tensor& full_bias, TpGroup group,
                                                   int parts)
    : group_(std::move(group)), parts_(parts) {
  const int rank = group_->rank(), size = group_->world_size();
  check_split("column_parallel_linear", "output", full_weight.size(0), rank, size, parts);
  weight = register_parameter("weight", take_slice(full_weight, weight_split(), rank, size));
  if (full_bias.defined())
    bias = register_parameter("bias", take_slice(full_bias, bias_split(), rank, size));
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& x) {
  return torch::nn::functional::linear(copy_to_tensor_parallel(x, group_), weight, bias);
}

RowParallelLinearImpl::RowParallelLinearImpl(const torch::Tensor& full_weight,
                                             const torch::Tensor& full_bias, TpGroup group)
    : group_(std::move(group)) {
  const int rank = group_->rank(), size = group_->world_size();
  check_split("row_parallel_linear", "input", full_weight.size(1), rank, size);
  weight = register_parameter("weight", take_slice(full_weight, weight_split(), rank, size));
  if (full_bias.defined()) bias = register_parameter("bias", full_bias.detach().clone());
}

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = reduce_from_tensor_parallel(torch::nn::functional::linear(x, weight), group_);
  return bias.defined() ? y + bias : y;
}

TensorParallelBlockImpl::TensorParallelBlockImpl(const TransformerBlock& full,
                                                 const TpGroup& group) {
  const int size = group->world_size();
  BATON_CHECK(size >= 1 && full->heads % size == 0, "[nn.tensor_parallel_block] tp=", size,
              " must divide the heads (", full->heads, ")");
  torch::NoGradGuard no_grad;
  const TransformerBlockImpl& f = *full;
  const int64_t hidden = f.ln1->options.normalized_shape()[0];
  local_heads = f.heads / size;
  head_dim = hidden / f.heads;
  ln1 = register_module("ln1", torch::nn::LayerNorm(f.ln1->options));
  ln1->weight.copy_(f.ln1->weight);
  ln1->bias.copy_(f.ln1->bias);
  ln2 = register_module("ln2", torch::nn::LayerNorm(f.ln2->options));
  ln2->weight.copy_(f.ln2->weight);
  ln2->bias.copy_(f.ln2->bias);
  // The fused QKV rows are [q; k; v], each by head: rank r keeps [q_r; k_r; v_r], its heads of all
  // three.
  qkv =
      register_module("qkv", ColumnParallelLinear(f.qkv->weight, f.qkv->bias, group, /*parts=*/3));
  proj = register_module("proj", RowParallelLinear(f.proj->weight, f.proj->bias, group));
  fc1 = register_module("fc1", ColumnParallelLinear(f.fc1->weight, f.fc1->bias, group));
  fc2 = register_module("fc2", RowParallelLinear(f.fc2->weight, f.fc2->bias, group));
}

torch::Tensor TensorParallelBlockImpl::forward(const torch::Tensor& x) {
  BATON_CHECK(x.dim() == 3, "[nn.tensor_parallel_block] input must be [batch, time, hidden]: got ",
              x.sizes());
  const int64_t batch = x.size(0), time = x.size(1);
  // [B, T, 3 H/t] -> 3 x [B, heads/t, T, head_dim]: this rank's heads.
  const auto heads = qkv(layer_norm_fp32(ln1, x))
                         .view({batch, time, 3, local_heads, head_dim})
                         .permute({2, 0, 3, 1, 4});
  // [B, heads/t, T, head_dim]
  const auto mixed = causal_attention_core(heads[0], heads[1], heads[2]);
  const auto h = x + proj(mixed.transpose(1, 2).reshape({batch, time, local_heads * head_dim}));
  return h + fc2(torch::gelu(fc1(layer_norm_fp32(ln2, h))));
}

TensorParallelLlamaBlockImpl::TensorParallelLlamaBlockImpl(const LlamaBlock& full,
                                                           const TpGroup& group) {
  const int size = group->world_size();
  const LlamaBlockImpl& f = *full;
  BATON_CHECK(size >= 1 && f.heads % size == 0, "[nn.tensor_parallel_llama_block] tp=", size,
              " must divide the heads (", f.heads, ")");
  torch::NoGradGuard no_grad;
  const int64_t hidden = f.wq->options.in_features();
  local_heads = f.heads / size;
  head_dim = hidden / f.heads;
  auto copy_norm = [&](const char* name, const RmsNorm& whole) {
    RmsNorm norm = register_module(name, RmsNorm(hidden, whole->eps));
    norm->weight.copy_(whole->weight);
    return norm;
  };
  attention_norm = copy_norm("attention_norm", f.attention_norm);
  auto column = [&](const char* name, const Linear& whole) {
    return register_module(name, ColumnParallelLinear(whole->weight, whole->bias, group));
  };
  auto row = [&](const char* name, const Linear& whole) {
    return register_module(name, RowParallelLinear(whole->weight, whole->bias, group));
  };
  wq = column("wq", f.wq);
  wk = column("wk", f.wk);
  wv = column("wv", f.wv);
  wo = row("wo", f.wo);
  ffn_norm = copy_norm("ffn_norm", f.ffn_norm);
  gate = column("gate", f.gate);
  up = column("up", f.up);
  down = row("down", f.down);
}

Tensors TensorParallelLlamaBlockImpl::forward(Tensors input) {
  detail::check_llama_input(input, "tensor_parallel_llama_block");
  return detail::llama_block_forward(*this, std::move(input), local_heads,
                                     head_dim);  // this rank's heads
}

TensorParallelChainImpl::TensorParallelChainImpl(const Chain& whole, LinearCut linear_cut,
                                                 const TpGroup& group)
    : cut(linear_cut), group_(group) {
  const auto& parts = whole->parts();
  const auto linear =
      parts.empty() ? nullptr : std::dynamic_pointer_cast<LinearImpl>(parts[0].ptr());
  BATON_CHECK(linear != nullptr,
              "[nn.tensor_parallel_chain] a column/row-parallel layer must start with a Linear");
  if (cut == LinearCut::kColumn) {
    column = register_module("0", ColumnParallelLinear(linear->weight, linear->bias, group));
  } else {
    row = register_module("0", RowParallelLinear(linear->weight, linear->bias, group));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    pointwise_.push_back(parts[i]);
    register_module(std::to_string(i), parts[i].ptr());
  }
}

torch::Tensor TensorParallelChainImpl::forward(const torch::Tensor& x) {
  const int k = group_->rank(), t = group_->world_size();
  torch::Tensor y;
  if (cut == LinearCut::kColumn) {
    y = column(x);
    for (auto& part : pointwise_) y = part.forward(y);
    const int64_t slice = y.size(-1);
    return torch::constant_pad_nd(y, {k * slice, (t - 1 - k) * slice});
  }
  const int64_t slice = row->weight.size(1);
  BATON_CHECK(x.dim() >= 1 && x.size(-1) == slice * t, "[nn.tensor_parallel_chain] the row-",
              "parallel layer takes the whole width ", slice * t,
              " (its column-parallel partner's output): got ", x.sizes());
  y = row(x.narrow(-1, k * slice, slice));
  for (auto& part : pointwise_) y = part.forward(y);
  return y;
}

torch::nn::AnyModule split_linear_chain(const torch::nn::AnyModule& whole, const TpGroup& group,
                                        LinearCut cut) {
  auto chain = std::dynamic_pointer_cast<ChainImpl>(whole.ptr());
  BATON_CHECK(chain != nullptr, "[nn.split_linear_chain] splits a Chain layer; got ",
              whole.ptr()->name());
  return torch::nn::AnyModule(TensorParallelChain(Chain(chain), cut, group));
}

ModelSpec tensor_parallel(const ModelSpec& spec, const TpGroup& group) {
  ModelSpec out = spec;
  for (auto& layer : out.layers) {
    layer.build = [build = layer.build, split = layer.split, group] {
      torch::nn::AnyModule whole = build();
      if (split) return split(std::move(whole), group);
      if (auto block = std::dynamic_pointer_cast<TransformerBlockImpl>(whole.ptr()))
        return torch::nn::AnyModule(TensorParallelBlock(TransformerBlock(block), group));
      if (auto block = std::dynamic_pointer_cast<LlamaBlockImpl>(whole.ptr()))
        return torch::nn::AnyModule(TensorParallelLlamaBlock(LlamaBlock(block), group));
      return whole;
    };
    layer.split = nullptr;  // applied by build
  }
  return out;
}

}  // namespace baton::nn
