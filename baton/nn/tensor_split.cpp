#include "baton/nn/tensor_split.h"

#include <torch/torch.h>

#include "baton/core/error.h"
#include "baton/nn/tensor_parallel.h"

namespace baton::nn {
namespace {

// The length of one rank's slice of one block along split.dim of `whole`.
int64_t slice_length(const torch::Tensor& whole, TensorSplit split, int rank, int size) {
  BATON_CHECK(size >= 1 && rank >= 0 && rank < size, "[nn.tensor_split] tensor-parallel rank ",
              rank, " of ", size, " is out of range");
  BATON_CHECK(split.parts >= 1 && split.dim >= 0 && split.dim < whole.dim(),
              "[nn.tensor_split] cannot split a ", whole.dim(),
              "-dimensional tensor along dimension ", split.dim, " in ", split.parts, " block(s)");
  const int64_t n = whole.size(split.dim);
  BATON_CHECK(n % (split.parts * size) == 0, "[nn.tensor_split] tp=", size, " does not divide the ",
              split.parts, " block(s) of dimension ", split.dim, " (", n, ") of a tensor of shape ",
              whole.sizes());
  return n / split.parts / size;
}

}  // namespace

torch::Tensor take_slice(const torch::Tensor& whole, TensorSplit split, int rank, int size) {
  const int64_t slice = slice_length(whole, split, rank, size);
  const int64_t block = slice * size;
  std::vector<torch::Tensor> pieces;
  for (int p = 0; p < split.parts; ++p) {
    pieces.push_back(whole.detach().narrow(split.dim, p * block + rank * slice, slice));
  }
  return torch::cat(pieces, split.dim);  // a copy, even of one piece
}

std::vector<torch::Tensor> gather_slices(const std::vector<torch::Tensor>& slices,
                                         const std::vector<TensorSplit>& splits,
                                         comm::Communicator& group, const std::string& what) {
  BATON_ASSERT(slices.size() == splits.size(), "[nn.gather_slices] ", slices.size(), " slices but ",
               splits.size(), " splits");
  std::vector<torch::Tensor> wholes;
  if (group.world_size() == 1) {
    for (const auto& slice : slices) wholes.push_back(slice.detach());
    return wholes;
  }
  const int size = group.world_size(), rank = group.rank();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < slices.size(); ++i) {
    const TensorSplit split = splits[i];
    std::vector<int64_t> shape = slices[i].sizes().vec();
    BATON_ASSERT(split.dim >= 0 && split.dim < static_cast<int>(shape.size()) &&
                     shape[split.dim] % split.parts == 0,
                 "[nn.gather_slices] a slice of shape ", slices[i].sizes(), " has no ", split.parts,
                 " block(s) along dimension ", split.dim);
    shape[split.dim] *= size;
    torch::Tensor whole = torch::zeros(shape, slices[i].options());
    const int64_t slice = slices[i].size(split.dim) / split.parts;
    for (int p = 0; p < split.parts; ++p) {
      whole.narrow(split.dim, (p * size + rank) * slice, slice)
          .copy_(slices[i].narrow(split.dim, p * slice, slice));
    }
    wholes.push_back(std::move(whole));
  }
  if (!wholes.empty()) group.all_reduce_sum(wholes, what);
  return wholes;
}

std::map<std::string, TensorSplit> tensor_parallel_splits(const torch::nn::Module& module) {
  std::map<std::string, TensorSplit> out;
  auto add = [&](const std::string& prefix, const torch::nn::Module& m) {
    if (const auto* column = dynamic_cast<const ColumnParallelLinearImpl*>(&m)) {
      out[prefix + "weight"] = column->weight_split();
      if (column->bias.defined()) out[prefix + "bias"] = column->bias_split();
    } else if (const auto* row = dynamic_cast<const RowParallelLinearImpl*>(&m)) {
      out[prefix + "weight"] = row->weight_split();
    }
  };
  add("", module);
  for (const auto& item : module.named_modules("", /*include_self=*/false))
    add(item.key() + ".", *item.value());
  return out;
}

}  // namespace baton::nn
