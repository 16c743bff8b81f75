// `baton train --profile-out FILE`: profiles the configured model's layers on
// one micro-batch of the first batch (runtime::profile_layers, on the CPU, in
// this one process) and writes the JSON profile that `baton plan --profile`
// reads (baton/plan/profile.h). It trains nothing.
#pragma once

#include <torch/types.h>

#include "baton/nn/layer_spec.h"
#include "baton/plan/profile_memory.h"
#include "baton/train/config.h"

namespace baton::train {

// REQUIRES: check_setup(config) passed and config.profile_out is set.
// Profiles with config.threads intra-op threads (all available cores when 0),
// median of 5 runs after a warm-up per layer. profile_layers times the whole
// backward, so the file's input- and weight-gradient times are each half of
// it ("backward_split": "halved"). Throws baton::Error naming the file when
// it cannot be written.
void write_profile(const TrainConfig& config);

// The memory model's figures for `model` on one micro-batch `sample`
// (runtime::measure_model_memory, in the config's precision), each layer's
// parameter bytes and largest tensor, and the optimizer's and transport's
// terms: a profile's "memory" object, and what --max-memory-gb checks before
// any rank starts.
plan::ProfiledMemory measure_profiled_memory(const TrainConfig& config, const nn::ModelSpec& model,
                                             const torch::Tensor& sample);

}  // namespace baton::train
