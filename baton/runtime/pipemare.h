// PipeMare (Yang et al., "PipeMare: Asynchronous Pipeline Parallel DNN
// Training", MLSys 2021) on schedule "pipemare": asynchronous 1F1B without a
// flush or weight stashing (async's order and weights: a stage updates after
// each of its backwards, and a micro-batch's forward and backward see
// different weights), with the paper's two techniques. Both scale with the
// stage's delay tau: the stage's own updates between a micro-batch's forward
// and its backward (schedule/update_delays.h: p - 1 - r on rank r of 1F1B).
//
// T1, learning-rate rescheduling: the update k (0-based, counted per stage)
// of a stage with delay tau runs at the caller's learning rate times
//     (tau + 1) ^ -(1 - min(1, k / K)),
// K = warmup_steps x micro-batches: 1 / (tau + 1) at first, rising
// geometrically to 1 at update K and 1 after (the paper divides by its
// delay at first and anneals the division away over K iterations; baton's tau
// counts the updates in between, 0 on the last stage, hence tau + 1, the
// age of the weights a gradient was taken at when it is applied). A delay of
// 0 or K = 0 gives 1.
//
// T2, discrepancy correction: each stage keeps a velocity, an exponential
// average of its updates' weight deltas,
//     v <- gamma v + (1 - gamma) (w_after - w_before),  gamma = D ^ (1 / tau),
// (an old delta's weight falls to D over one delay, so every stage averages
// over the same number of its delays), and runs a micro-batch's backward on
// w - tau v, where w are the weights as they are then: w - tau v estimates
// w as it was tau updates ago, the weights the forward used, so the backward
// approximates weight stashing (pipedream) with one extra copy of the
// weights and a velocity instead of p - r versions. The forward runs on the
// current weights, as async's. The velocity is kept as an exponential average
// of the weights themselves, a <- gamma a + (1 - gamma) w before each update
// (a = w at first): after the update v = (1 - gamma)(w - a), the same average
// of deltas, so w - tau v and the average's next value come from one pass
// over w and a, with nothing to remember across the optimizer's step.
#pragma once

#include <torch/arg.h>
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace baton::runtime {

struct PipeMareOptions {
  // T1's warm-up, in training steps (each step updates a stage once per
  // micro-batch); 0 turns T1 off (the caller's learning rate throughout).
  TORCH_ARG(int64_t, warmup_steps) = 100;
  // T2 on or off (off: backwards run on the current weights, as async's).
  TORCH_ARG(bool, correction) = true;
  // T2's D, in [0, 1): what an old weight delta counts in the velocity one
  // delay later. 0: the velocity is the last update's delta.
  TORCH_ARG(double, decay) = 0.5;
};

// Throws baton::Error naming the option and value for a warm-up below 0 or a
// decay outside [0, 1).
void check_pipemare_options(const PipeMareOptions& options);

// T1's factor on the learning rate of update `update` (0-based) of a stage
// with delay `delay`, for a warm-up of `warmup_updates` updates (0: off).
double pipemare_lr_factor(int delay, int64_t update, int64_t warmup_updates);

// T2's velocity decay per update, D ^ (1 / delay). REQUIRES: delay >= 1.
double pipemare_velocity_decay(double decay, int delay);

// One stage's PipeMare state, kept by WeightVersions (runtime/weight_versions.h).
class PipeMareStage {
 public:
  // `masters`: the stage's master weights, which the optimizer updates in
  // place and which never move. `warmup_updates`: T1's K.
  PipeMareStage(std::vector<torch::Tensor> masters, int delay, int64_t warmup_updates,
                const PipeMareOptions& options);

  int delay() const { return delay_; }
  // Whether backwards run on corrected weights (T2 on and a delay above 0).
  bool corrects() const { return !compute_.empty(); }
  // With corrects(): the tensors the stage computes with, filled before a
  // forward with the masters' values and before a backward with
  // masters - delay x velocity. Without: not to be called. A backward is
  // followed by its update (begin_update(), the step, end_update()) before
  // the masters change otherwise: backward_weights() already folds the
  // masters into the velocity's average for that update.
  const std::vector<torch::Tensor>& forward_weights();
  const std::vector<torch::Tensor>& backward_weights();
  // Around the caller's update of the masters: begin_update() returns T1's
  // factor for it, end_update() counts it.
  double begin_update() const;
  void end_update();

  int64_t updates() const { return updates_; }
  // The velocity, (1 - gamma)(masters - average) (empty without corrects());
  // exact except between a backward_weights() and its update.
  std::vector<torch::Tensor> velocity() const;

 private:
  std::vector<torch::Tensor> masters_;
  std::vector<torch::Tensor> compute_;  // what P points at
  std::vector<torch::Tensor> average_;  // the masters' exponential average
  int delay_;
  int64_t warmup_updates_;
  double gamma_ = 0;
  int64_t updates_ = 0;
};

}  // namespace baton::runtime
