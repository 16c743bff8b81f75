// What each layer's recorded forward keeps, measured with the counting
// allocator (comm/memory_counter.h) on one micro-batch: the inputs of the
// activation model (sim/memory_model.h) that predicts a rank's peak bytes.
#pragma once

#include <torch/types.h>

#include <vector>

#include "baton/nn/layer_call.h"
#include "baton/nn/layer_spec.h"
#include "baton/runtime/precision.h"
#include "baton/sim/memory_model.h"

namespace baton::runtime {

// Builds the layers one at a time and runs each on one micro-batch (the
// previous layer's output), in `precision` as the executor computes, then the
// model's loss on the last output against zero targets (the classification
// and token losses take int64 class ids shaped as the output without its
// last dimension). Installs the counting allocator when it is not installed,
// and moves its peak (reset_memory_peak), so call it before the steps whose
// peak counts. Allocations of this thread only; run it with no step running.
sim::ModelMemory measure_model_memory(const nn::ModelSpec& model, const nn::Tensors& sample,
                                      uint64_t seed, Precision precision = Precision::Fp32);

}  // namespace baton::runtime
