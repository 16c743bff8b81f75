// How a tensor-parallel rank's parameter is cut from the whole layer's
// tensor, and how the whole is put back together from the ranks' slices. The
// parallel Linears (tensor_parallel.h) cut their weights with take_slice, and
// checkpoints (which hold whole layers, so that any tp reads them) gather
// with gather_slices and cut on load with take_slice again: one definition of
// each split.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include <map>
#include <string>
#include <vector>

#include "baton/comm/communicator.h"

namespace baton::nn {

// A split along dimension `dim` of a tensor viewed there as `parts` equal
// blocks (the fused QKV rows are 3: q, k and v), each block cut into `size`
// equal slices; rank k holds slice k of every block, block after block. A
// column-parallel weight is {0, 1}, a row-parallel one {1, 1}.
struct TensorSplit {
  int dim = 0;
  int parts = 1;
};

// Rank `rank`'s slice of `whole` (a contiguous copy). Throws baton::Error
// naming the sizes unless parts x size divides whole's dimension `dim`.
torch::Tensor take_slice(const torch::Tensor& whole, TensorSplit split, int rank, int size);

// The whole tensors from this rank's `slices` (split as `splits` says, one
// each) over `group`, the tensor-parallel group whose rank() is this rank's
// slice index: a collective over the group, every member passing slices of
// the same shapes and dtypes in the same order, and every member gets the
// whole tensors. Exact (an all-reduce of zero-padded slices: x + 0 = x).
// A group of one rank (tp = 1): the slices are already whole.
std::vector<torch::Tensor> gather_slices(const std::vector<torch::Tensor>& slices,
                                         const std::vector<TensorSplit>& splits,
                                         comm::Communicator& group, const std::string& what);

// Every split parameter of `module` and its descendants, keyed as
// module.named_parameters() keys it (e.g. "3.qkv.weight" for a module whose
// child "3" is a TensorParallelBlock); parameters not listed are whole on
// every tensor-parallel rank.
std::map<std::string, TensorSplit> tensor_parallel_splits(const torch::nn::Module& module);

}  // namespace baton::nn
