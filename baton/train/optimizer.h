// The optimizer `baton train --optimizer` names, over this rank's parameters,
// and the learning-rate schedule (--lr-schedule) it follows.
#pragma once

#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "baton/train/config.h"

namespace baton::train {

// sgd, adam or adamw with config.lr and config.weight_decay. REQUIRES: check_config(config) passed.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& config,
                                                        std::vector<torch::Tensor> parameters);

// The learning rate of step `step` (0-based) of `total`: during the first
// warmup_steps, lr * (step + 1) / warmup_steps; after them constant, or
// cosine decay from lr towards 0 over the remaining total - warmup_steps.
double learning_rate(const TrainConfig& config, int64_t step, int64_t total);

// Sets every parameter group's learning rate.
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

// Bytes the optimizer keeps per parameter (momentum, Adam's moments).
double optimizer_state_bytes(torch::optim::Optimizer& optimizer);

// The bytes a tensor's elements take (0 when undefined).
double bytes_of(const torch::Tensor& t);

}  // namespace baton::train
