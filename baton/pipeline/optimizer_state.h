// A torch::optim optimizer's state for one parameter, as named tensors a
// checkpoint file can hold, and back. Supports SGD (momentum_buffer), Adam
// and AdamW (step, exp_avg, exp_avg_sq, max_exp_avg_sq with amsgrad).
#pragma once

#include <torch/optim/optimizer.h>

#include <string>

#include "baton/pipeline/checkpoint_files.h"

namespace baton::checkpoint {

// "sgd", "adam" or "adamw". Throws baton::Error for any other optimizer.
std::string optimizer_kind(torch::optim::Optimizer& optimizer);

// The state `optimizer` keeps for `parameter`, e.g. {"step", "exp_avg",
// "exp_avg_sq"}; empty before its first step (or SGD without momentum).
// "step" is a 0-dim int64 tensor.
NamedTensors optimizer_state_of(torch::optim::Optimizer& optimizer, const torch::Tensor& parameter);

// Replaces `parameter`'s state with `state` (what optimizer_state_of gave);
// an empty `state` clears it. Throws baton::Error naming `file` and the
// entry when an entry is missing or its shape is not the parameter's.
void set_optimizer_state(torch::optim::Optimizer& optimizer, const torch::Tensor& parameter,
                         const NamedTensors& state, const std::string& file,
                         const std::string& parameter_name);

}  // namespace baton::checkpoint
