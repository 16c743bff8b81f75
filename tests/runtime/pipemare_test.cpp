// PipeMare's two techniques at the level of the weight versions
// (runtime/pipemare.h, runtime/weight_versions.h), against hand computations:
// T1's warm-up factor against its formula, T2's velocity and extrapolated
// weights for a parameter with known updates, and that a backward through
// autograd reads the extrapolated weights while the forward read the masters.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/runtime/pipemare.h"
#include "baton/runtime/weight_versions.h"

namespace baton::runtime {
namespace {

using testing::HasSubstr;

// (delay + 1) ^ -(1 - k / K) during the warm-up, 1 after it, with a delay of
// 0 and with K = 0.
TEST(PipeMareWarmup, FactorFollowsItsFormula) {
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(3, 0, 100), 0.25);  // 1 / (3 + 1)
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(3, 50, 100), 0.5);  // 4 ^ -0.5
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(3, 75, 100), std::pow(2.0, -0.5));
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(1, 0, 8), 0.5);
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(1, 4, 8), std::pow(2.0, -0.5));
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(3, 100, 100), 1);
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(3, 5000, 100), 1);
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(0, 0, 100), 1);  // the last stage: no delay
  EXPECT_DOUBLE_EQ(pipemare_lr_factor(3, 0, 0), 1);    // warm-up off
  // Rising at every update, never above 1.
  for (int k = 1; k < 100; ++k) {
    EXPECT_GT(pipemare_lr_factor(2, k, 100), pipemare_lr_factor(2, k - 1, 100)) << k;
    EXPECT_LT(pipemare_lr_factor(2, k, 100), 1) << k;
  }
}

TEST(PipeMareVelocity, DecayPerUpdateFallsToDOverOneDelay) {
  EXPECT_DOUBLE_EQ(pipemare_velocity_decay(0.25, 2), 0.5);
  EXPECT_DOUBLE_EQ(pipemare_velocity_decay(0.5, 1), 0.5);
  EXPECT_NEAR(std::pow(pipemare_velocity_decay(0.3, 5), 5), 0.3, 1e-12);
}

// One parameter w, delay 2, D = 0.25 (so gamma = 0.5), updates of -1, -3
// and +2, each after a backward:
//   v1 = 0.5 * 0 + 0.5 * (-1) = -0.5,  v2 = 0.5 * (-0.5) + 0.5 * (-3) = -1.75,
//   v3 = 0.5 * (-1.75) + 0.5 * 2 = 0.125;
//   w: 2 -> 1 -> -2 -> 0; the backward's weights w - 2 v: 2, 2, 1.5, -0.25.
// Three such elements in fp32 (the fused loop) and in fp64 (ATen's ops).
TEST(PipeMareStage, ExtrapolatesTheMastersByDelayTimesVelocity) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    torch::Tensor w = torch::full({3}, 2.0, dtype);
    PipeMareStage stage({w}, /*delay=*/2, /*warmup_updates=*/0,
                        PipeMareOptions().correction(true).decay(0.25));
    ASSERT_TRUE(stage.corrects());
    const double steps[] = {-1, -3, 2};
    const double velocity[] = {-0.5, -1.75, 0.125};
    const double backward[] = {2, 2, 1.5, -0.25};
    const double masters[] = {1, -2, 0};
    for (int k = 0; k < 3; ++k) {
      EXPECT_TRUE(torch::equal(stage.forward_weights()[0], w)) << k;
      EXPECT_TRUE(
          torch::allclose(stage.backward_weights()[0], torch::full({3}, backward[k], dtype)))
          << k << ": " << stage.backward_weights()[0];
      EXPECT_DOUBLE_EQ(stage.begin_update(), 1);  // warm-up off
      w.add_(steps[k]);                           // the optimizer, in place
      stage.end_update();
      EXPECT_TRUE(torch::allclose(stage.velocity()[0], torch::full({3}, velocity[k], dtype))) << k;
      EXPECT_TRUE(torch::equal(w, torch::full({3}, masters[k], dtype)))
          << "the masters are the optimizer's";
    }
    EXPECT_TRUE(torch::allclose(stage.backward_weights()[0], torch::full({3}, backward[3], dtype)));
    EXPECT_EQ(stage.updates(), 3);
  }
}

TEST(PipeMareStage, KeepsNoCopyWithoutADelayOrWithCorrectionOff) {
  torch::Tensor w = torch::ones({3});
  EXPECT_FALSE(PipeMareStage({w}, 0, 0, PipeMareOptions()).corrects());
  EXPECT_FALSE(PipeMareStage({w}, 2, 0, PipeMareOptions().correction(false)).corrects());
}

TEST(PipeMareOptionsCheck, RefusesANegativeWarmupAndADecayOutsideZeroToOne) {
  auto message = [](const PipeMareOptions& o) {
    try {
      check_pipemare_options(o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_THAT(message(PipeMareOptions().warmup_steps(-1)), HasSubstr("warmup_steps must be"));
  EXPECT_THAT(message(PipeMareOptions().decay(1)), HasSubstr("decay must be in [0, 1), got 1"));
  EXPECT_THAT(message(PipeMareOptions().decay(-0.1)), HasSubstr("decay must be in [0, 1)"));
  EXPECT_THAT(message(PipeMareOptions().decay(std::nan(""))), HasSubstr("decay must be in"));
  EXPECT_EQ(message(PipeMareOptions().decay(0).warmup_steps(0)), "");
}

// Through WeightVersions and autograd: a stage y = P * x with P one element,
// delay 2, decay 0.25 (gamma 0.5), warm-up of 2 steps x 2 micro-batches.
// The update (lr 1, scaled by T1's factor) steps the master by -grad. Each
// micro-batch runs a forward, then the backward after the others' updates;
// dL/dx = P as the backward reads it, so x.grad is the backward's weights
// and must equal the masters less 2 x velocity, with the forward's output
// P x on the masters' values when it ran.
TEST(PipeMareWeightVersions, ForwardReadsTheMastersAndBackwardTheirExtrapolation) {
  torch::Tensor p = torch::tensor({3.0f}).requires_grad_(true);
  PipeMarePlan plan{PipeMareOptions().warmup_steps(2).decay(0.25), {2}, 2};
  WeightVersions versions({{p}}, WeightVersions::Updates::PipeMare, plan);
  torch::Tensor master = versions.masters()[0];
  std::vector<double> scales;
  versions.set_update([&](double lr_scale) {
    scales.push_back(lr_scale);
    torch::NoGradGuard no_grad;
    master.sub_(master.grad() * lr_scale);
  });
  // Hand bookkeeping of what the masters and the velocity are.
  double w = 3, v = 0;
  auto update_by_hand = [&](double grad, int k) {
    const double before = w;
    w -= grad * std::pow(3.0, -(1 - std::min(1.0, k / 4.0)));
    v = 0.5 * v + 0.5 * (w - before);
  };
  // Micro-batches 0, 1, 2 forward (cells 0..2), then their backwards in
  // order, each followed by its update: micro-batch 2's backward runs two
  // updates after its forward.
  std::vector<torch::Tensor> xs, ys;
  std::vector<double> forward_w;
  for (int cell = 0; cell < 3; ++cell) {
    versions.before(0, /*forward=*/true, cell, /*carried=*/false);
    xs.push_back(torch::tensor({1.0f + cell}).requires_grad_(true));
    ys.push_back(p * xs.back());
    forward_w.push_back(w);
    EXPECT_FLOAT_EQ(ys.back().item<float>(), static_cast<float>(w * (1 + cell))) << cell;
  }
  for (int cell = 0; cell < 3; ++cell) {
    versions.before(0, /*forward=*/false, cell, /*carried=*/false);
    const double backward_w = w - 2 * v;
    ys[cell].backward();
    EXPECT_NEAR(xs[cell].grad().item<float>(), backward_w, 1e-6) << cell;
    // dL/dP = x: the gradient the update applies.
    EXPECT_FLOAT_EQ(p.grad().item<float>(), 1.0f + cell) << cell;
    versions.after_backward(0, cell);
    update_by_hand(1.0 + cell, cell);
    EXPECT_NEAR(master.item<float>(), w, 1e-6) << cell;
  }
  ASSERT_EQ(scales.size(), 3u);
  EXPECT_DOUBLE_EQ(scales[0], 1.0 / 3);  // delay 2: 1 / (2 + 1)
  EXPECT_DOUBLE_EQ(scales[1], std::pow(3.0, -0.75));
  EXPECT_DOUBLE_EQ(scales[2], std::pow(3.0, -0.5));
  // The last backward ran on the extrapolation, which differs from the
  // masters then (a correction that changed something).
  EXPECT_NE(w - 2 * v, w);
  // Evaluation reads the masters.
  versions.use_latest();
  EXPECT_NEAR(p.item<float>(), w, 1e-6);
  // Two versions: the masters and the copy the stage computes on.
  EXPECT_EQ(versions.held(), 2);
}

}  // namespace
}  // namespace baton::runtime
