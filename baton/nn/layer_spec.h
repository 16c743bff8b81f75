// A model as an ordered list of lazily built layers. Each rank builds only the
// layers of its own stages, and a layer's initial parameters depend only on
// (seed, global layer index), so every partitioning starts from the same
// weights as one device.
#pragma once

#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "baton/nn/skip.h"
#include "baton/partition/partition.h"
#include "baton/schedule/schedule.h"

namespace baton::comm {
class Communicator;
}

namespace baton::nn {

// One layer: its module's forward takes and returns a torch::Tensor or a
// std::vector<torch::Tensor> (a stage boundary carries a list of tensors:
// nn/layer_call.h). `build` constructs a fresh module on the CPU, drawing its
// initial values from torch's default CPU generator.
struct LayerSpec {
  std::string name;
  std::function<torch::nn::AnyModule()> build;
  // The skip connections this layer stashes and pops (nn/skip.h), declared
  // so the schedule knows them before anything runs.
  SkipNames skips = {};
  // This layer's share on one rank of a tensor-parallel group, made from the
  // whole layer that `build` returned (nn::tensor_parallel calls it; see
  // tensor_parallel.h). Empty: nn::tensor_parallel splits the blocks it
  // knows by type and keeps any other layer whole on every tp rank.
  std::function<torch::nn::AnyModule(torch::nn::AnyModule whole,
                                     const std::shared_ptr<comm::Communicator>& group)>
      split = {};
};

// A skip connection between two layers: `from` stashes `name`, `to` pops it.
struct SkipEdge {
  std::string name;
  int from = 0;
  int to = 0;
};

// One copy of a tied weight: a parameter of a layer, by the layer's global
// index and the parameter's name inside it ("token.weight").
struct TiedParameter {
  int layer = 0;
  std::string name;
};

struct ModelSpec {
  std::string name;
  std::vector<LayerSpec> layers;
  // The MEAN loss over the (micro-)batch, so the runtime can scale each
  // micro-batch's loss by its share of the mini-batch.
  std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)> loss;
  // Tied weights (a GPT's embedding and LM head): each entry is one weight
  // held by several layers. build_layer() starts every copy from the first
  // one's initial value; training sums the copies' gradients (REDUCE_TIED),
  // so they stay identical, as one shared parameter would.
  std::vector<std::vector<TiedParameter>> tied = {};

  int num_layers() const { return static_cast<int>(layers.size()); }
};

// The model's skip connections, in stash order. Throws baton::Error naming
// the layer (index and name) for a pop with no earlier stash, a name stashed
// twice, and a stash never popped.
std::vector<SkipEdge> skip_edges(const ModelSpec& spec);

// The skip connections whose two layers land on different stages of `cut`:
// the schedule's skips (schedule::with_skips), in stash order.
std::vector<schedule::Skip> stage_skips(const ModelSpec& spec, const partition::Partition& cut);

// The seed that layer `global_index` is built under: a mix of both values, so
// nearby seeds and indices give unrelated streams.
uint64_t layer_seed(uint64_t seed, int global_index);

// Builds layer `global_index` with torch's default CPU generator seeded from
// layer_seed(seed, global_index), then restores the generator's state, so the
// parameters depend on nothing else (not the rank, not the layers built
// before). A layer holding a later copy of a tied weight (ModelSpec::tied)
// takes the first copy's initial value. Calls are serialized with each
// other; another thread drawing from the default CPU generator during a
// build would perturb it.
// REQUIRES: 0 <= global_index < spec.num_layers().
torch::nn::AnyModule build_layer(const ModelSpec& spec, int global_index, uint64_t seed);

// Builds layers [begin, end) (end = -1: to the last) into one Sequential, e.g.
// the whole model for a single-device reference run. Children are named by
// their global index ("3"), as torch names a Sequential's children.
torch::nn::Sequential build_sequential(const ModelSpec& spec, uint64_t seed, int begin = 0,
                                       int end = -1);

// Splits an already built Sequential into one layer per child; each build()
// returns that same child module (no copy). The children were initialized when
// the user built them, so the same-weights-for-every-partitioning contract is
// then the user's. The loss is left empty for the caller to set.
ModelSpec from_sequential(const torch::nn::Sequential& sequential, std::string name = "sequential");

}  // namespace baton::nn
