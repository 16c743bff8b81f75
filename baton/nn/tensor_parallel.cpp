#include "baton/nn/tensor_parallel.h"

#include <torch/autograd.h>
#include <torch/nn/functional/linear.h>

#include <cstdint>
#include <vector>

#include "baton/core/error.h"

namespace baton::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

comm::Communicator* group_of(AutogradContext* ctx) {
  return reinterpret_cast<comm::Communicator*>(ctx->saved_data["group"].toInt());
}

torch::Tensor summed(const torch::Tensor& x, comm::Communicator* group, const char* what) {
  std::vector<torch::Tensor> t{x.contiguous().clone()};
  group->all_reduce_sum(t, what);
  return t[0];
}

struct CopyToTensorParallel : torch::autograd::Function<CopyToTensorParallel> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {summed(grad[0], group_of(ctx), "the tensor-parallel input gradient (f backward)"), torch::Tensor()};
  }
};

struct ReduceFromTensorParallel : torch::autograd::Function<ReduceFromTensorParallel> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, int64_t group) {
    return summed(x, reinterpret_cast<comm::Communicator*>(group), "the tensor-parallel output (g forward)");
  }
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad[0], torch::Tensor()}; }
};

int64_t handle(comm::Communicator* group) { return reinterpret_cast<int64_t>(group); }

void check_split(const char* layer, const char* dimension, int64_t size_of_dim, int rank, int size) {
  BATON_CHECK(size >= 1 && rank >= 0 && rank < size, "[nn.", layer, "] tensor-parallel rank ", rank,
              " of ", size, " is out of range");
  BATON_CHECK(size_of_dim % size == 0, "[nn.", layer, "] tp=", size, " must divide the ", dimension,
              " features (", size_of_dim, ")");
}

}  // namespace

torch::Tensor copy_to_tensor_parallel(const torch::Tensor& x, comm::Communicator* group) {
  if (group == nullptr || group->world_size() == 1) return x;
  return CopyToTensorParallel::apply(x, handle(group));
}

torch::Tensor reduce_from_tensor_parallel(const torch::Tensor& x, comm::Communicator* group) {
  if (group == nullptr || group->world_size() == 1) return x;
  return ReduceFromTensorParallel::apply(x, handle(group));
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(const torch::Tensor& weight, const torch::Tensor& bias,
                                                   int rank, int size, comm::Communicator* group)
    : full_weight_(weight.detach()), full_bias_(bias.defined() ? bias.detach() : bias), rank_(rank),
      size_(size), group_(group) {
  check_split("column_parallel_linear", "output", weight.size(0), rank, size);
  reset();
}

void ColumnParallelLinearImpl::reset() {
  const int64_t rows = full_weight_.size(0) / size_;
  weight = register_parameter("weight", full_weight_.narrow(0, rank_ * rows, rows).clone());
  if (full_bias_.defined()) bias = register_parameter("bias", full_bias_.narrow(0, rank_ * rows, rows).clone());
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& x) {
  return torch::nn::functional::linear(copy_to_tensor_parallel(x, group_), weight, bias);
}

RowParallelLinearImpl::RowParallelLinearImpl(const torch::Tensor& weight, const torch::Tensor& bias, int rank,
                                             int size, comm::Communicator* group)
    : full_weight_(weight.detach()), full_bias_(bias.defined() ? bias.detach() : bias), rank_(rank),
      size_(size), group_(group) {
  check_split("row_parallel_linear", "input", weight.size(1), rank, size);
  reset();
}

void RowParallelLinearImpl::reset() {
  const int64_t columns = full_weight_.size(1) / size_;
  weight = register_parameter("weight", full_weight_.narrow(1, rank_ * columns, columns).clone());
  if (full_bias_.defined()) bias = register_parameter("bias", full_bias_.clone());
}

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = reduce_from_tensor_parallel(torch::nn::functional::linear(x, weight), group_);
  return bias.defined() ? y + bias : y;
}

}  // namespace baton::nn
