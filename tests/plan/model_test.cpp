// The planner's arithmetic against the papers' formulas, computed here
// independently for stated sizes.
#include <gtest/gtest.h>

#include <cmath>

#include "baton/plan/model.h"

namespace baton::plan {
namespace {

// GPT-3 175B as in Narayanan et al. 2021, table 1.
const ModelShape kGpt3{96, 12288, 96, 2048, 51200};

TEST(PlanModel, StepFlopsWithRecomputationAreMegatronsFormula) {
  const double B = 1536, s = 2048, l = 96, h = 12288, V = 51200;
  const double megatron = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  EXPECT_NEAR(step_flops(kGpt3, B, true) / megatron, 1.0, 1e-12);
  // About 4.5e18 FLOPs per step (the paper's 175B row).
  EXPECT_NEAR(megatron, 4.50e18, 0.05e18);
}

TEST(PlanModel, StepFlopsWithoutRecomputationDropOneForwardOfTheLayers) {
  const double B = 8, s = 1024, l = 24, h = 2048, V = 50257;
  const ModelShape shape{24, 2048, 16, 1024, 50257};
  const double expected = 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V;
  EXPECT_NEAR(step_flops(shape, B, false) / expected, 1.0, 1e-12);
}

TEST(PlanModel, ForwardInputAndWeightPassesAreAThirdOfALayersWorkEach) {
  const double b = 2, s = 2048, h = 12288;
  // Megatron: 72 b s h^2 (1 + s / 6h) per layer for F + I + W.
  EXPECT_NEAR(3 * layer_forward_flops(kGpt3, b) / (72 * b * s * h * h * (1 + s / (6 * h))), 1.0,
              1e-12);
}

TEST(PlanModel, ParametersAreMegatronsCount) {
  const double l = 96, h = 12288, V = 51200, s = 2048;
  const double megatron = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h));
  EXPECT_NEAR((l * layer_parameters(kGpt3) + embedding_parameters(kGpt3)) / megatron, 1.0, 1e-12);
  EXPECT_NEAR(megatron / 1e9, 174.6, 0.1);
}

TEST(PlanModel, ActivationBytesAreKorthikantisWithoutTensorParallelism) {
  for (double b : {1.0, 4.0}) {
    const double s = 2048, h = 12288, a = 96;
    EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, b, 1, false),
                     34 * s * b * h + 5 * a * s * s * b);
    EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, b, 1, true), 2 * s * b * h);
  }
}

TEST(PlanModel, ActivationBytesSplitOverTensorParallelRanksAsKorthikantiEquationTwo) {
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(kGpt3, b, 8, false),
                   s * b * h * (10 + 24 / t + 5 * a * s / (h * t)));
  // GPT-3 175B at t = 8, b = 1: 2048 * 12288 * (10 + 3 + 10) bytes per layer.
  EXPECT_NEAR(layer_activation_bytes(kGpt3, 1, 8, false) / 1e9, 0.579, 0.001);
}

TEST(PlanModel, AdamInMixedPrecisionKeepsSixteenBytesPerParameterAndZeroOneShardsTwelve) {
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(1, false), 16);
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(8, false), 16);
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(4, true), 4 + 3);
}

}  // namespace
}  // namespace baton::plan
