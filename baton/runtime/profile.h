// Profiling the layers of a model on one micro-batch, to feed the balancing
// methods (partition::balance "time", "memory", "optimal").
#pragma once

#include <torch/types.h>

#include <vector>

#include "baton/nn/layer_call.h"
#include "baton/nn/layer_spec.h"
#include "baton/partition/partition.h"
#include "baton/runtime/precision.h"

namespace baton::runtime {

// Builds the layers one at a time (only one exists at once, plus the running
// activation) and times each layer's forward and backward on `sample`, the
// median of `repeats` runs after one warm-up, in milliseconds. Bytes:
// parameters, the layer's input as activation_bytes (a lower bound of what
// autograd keeps: the Pipeline's profile replaces it with the counting
// allocator's measure, sim::layer_kept_bytes), and its output (what a stage
// ending with it sends).
// A model of several inputs takes them as a list (nn/layer_call.h); bytes
// then count every tensor. `precision`: each run under autocast to its
// compute dtype on the CPU, as the executor runs a step (precision.h), so
// times and bytes are that precision's.
std::vector<partition::LayerCost> profile_layers(const nn::ModelSpec& model,
                                                 const torch::Tensor& sample, uint64_t seed,
                                                 int repeats = 3,
                                                 Precision precision = Precision::Fp32);
std::vector<partition::LayerCost> profile_layers(const nn::ModelSpec& model,
                                                 const nn::Tensors& sample, uint64_t seed,
                                                 int repeats = 3,
                                                 Precision precision = Precision::Fp32);

}  // namespace baton::runtime
