#include "baton/train/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>

#include "baton/core/choices.h"

namespace baton::train {

double bytes_of(const torch::Tensor& t) {
  return t.defined() ? static_cast<double>(t.numel() * t.element_size()) : 0;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const TrainConfig& c,
                                                        std::vector<torch::Tensor> params) {
  const bool given = c.weight_decay >= 0;
  switch (c.optimizer) {
    case Optimizer::Sgd:
      return std::make_unique<torch::optim::SGD>(
          params, torch::optim::SGDOptions(c.lr).weight_decay(given ? c.weight_decay : 0));
    case Optimizer::AdamW: {
      torch::optim::AdamWOptions options(c.lr);
      if (given) options.weight_decay(c.weight_decay);
      return std::make_unique<torch::optim::AdamW>(params, options);
    }
    case Optimizer::Adam:
      break;
  }
  return std::make_unique<torch::optim::Adam>(
      params, torch::optim::AdamOptions(c.lr).weight_decay(given ? c.weight_decay : 0));
}

double learning_rate(const TrainConfig& c, int64_t step, int64_t total) {
  const int64_t warmup = c.warmup_steps;
  if (step < warmup) return c.lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  if (c.lr_schedule == LrSchedule::Cosine) {
    // Over the steps after the warm-up (Megatron's decay after --lr-warmup-iters).
    const int64_t decay = std::max<int64_t>(1, total - warmup);
    return 0.5 * c.lr * (1 + std::cos(M_PI * static_cast<double>(step - warmup) / decay));
  }
  return c.lr;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

double optimizer_state_bytes(torch::optim::Optimizer& optimizer) {
  double bytes = 0;
  for (auto& entry : optimizer.state()) {
    torch::optim::OptimizerParamState* state = entry.second.get();
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(state)) {
      bytes += bytes_of(adam->exp_avg()) + bytes_of(adam->exp_avg_sq()) +
               bytes_of(adam->max_exp_avg_sq());
    } else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state)) {
      bytes += bytes_of(adamw->exp_avg()) + bytes_of(adamw->exp_avg_sq()) +
               bytes_of(adamw->max_exp_avg_sq());
    } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state)) {
      bytes += bytes_of(sgd->momentum_buffer());
    }
  }
  return bytes;
}

}  // namespace baton::train
