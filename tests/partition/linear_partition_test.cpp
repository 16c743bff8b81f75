// by_params, by_time and by_memory against brute force over every partition.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>

#include "baton/partition/balance.h"
#include "baton/partition/min_max.h"
#include "brute_force.h"

namespace baton::partition {
namespace {

using testing::brute_force;
using testing::random_costs;

double weight_sum(const std::vector<LayerCost>& costs, int first, int end,
                  double (*weight)(const LayerCost&)) {
  double sum = 0;
  for (int i = first; i < end; ++i) sum += weight(costs[i]);
  return sum;
}

double params(const LayerCost& c) {
  return c.parameter_bytes;
}
double time(const LayerCost& c) {
  return c.forward_time + c.backward_time;
}

// (layers, stages)
class LinearMethods : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(LinearMethods, MatchBruteForceOnRandomCosts) {
  const auto [layers, stages] = GetParam();
  for (int seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(1000 * layers + 10 * stages + seed);
    const bool integers = seed % 2 == 0;
    const auto costs = random_costs(rng, layers, integers);
    std::vector<double> in_flight;
    for (int s = 0; s < stages; ++s) in_flight.push_back(integers ? stages - s : 0.5 + s * 0.7);
    const BalanceOptions options = BalanceOptions().set_activations_in_flight(in_flight);

    const testing::StageScore param_score = [&](int, int a, int b) {
      return weight_sum(costs, a, b, params);
    };
    const testing::StageScore time_score = [&](int, int a, int b) {
      return weight_sum(costs, a, b, time);
    };
    const testing::StageScore memory_score = [&](int s, int a, int b) {
      double bytes = 0;
      for (int i = a; i < b; ++i) {
        bytes += costs[i].parameter_bytes + in_flight[s] * costs[i].activation_bytes;
      }
      return bytes;
    };
    const std::tuple<const char*, Partition, testing::StageScore> cases[] = {
        {"params", by_params(costs, stages), param_score},
        {"time", by_time(costs, stages), time_score},
        {"memory", by_memory(costs, stages, options), memory_score},
    };
    for (const auto& [name, got, score] : cases) {
      SCOPED_TRACE(std::string(name) + " seed " + std::to_string(seed) + " partition " +
                   got.to_string());
      ASSERT_EQ(got.stages(), stages);
      ASSERT_EQ(got.layers(), layers);
      const auto best = brute_force(layers, stages, score);
      EXPECT_NEAR(testing::bottleneck_of(got, score), best.bottleneck, 1e-9 * best.bottleneck);
      // With integer costs every sum is exact, so the tie rule is checkable exactly.
      if (integers) {
        EXPECT_EQ(got.layers_per_stage(), best.counts);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, LinearMethods, ::testing::ValuesIn(testing::sweep_shapes()),
                         [](const auto& info) { return testing::shape_name(info); });

TEST(LinearPartition, EqualWeightsGiveTheUniformPartition) {
  for (double w : {1.0, 0.1, 3.7e9}) {
    for (int layers = 1; layers <= 24; ++layers) {
      for (int stages = 1; stages <= layers; ++stages) {
        const Partition got(detail::linear_partition(std::vector<double>(layers, w), stages));
        EXPECT_EQ(got, uniform(layers, stages)) << "w=" << w << " L=" << layers << " S=" << stages;
      }
    }
  }
}

TEST(LinearPartition, PutsAHeavyLayerAlone) {
  EXPECT_EQ(Partition(detail::linear_partition({1, 1, 10, 1, 1, 1}, 3)), Partition({2, 1, 3}));
}

TEST(LinearPartition, ZeroWeightsGiveTheUniformPartition) {
  EXPECT_EQ(Partition(detail::linear_partition(std::vector<double>(7, 0.0), 3)), uniform(7, 3));
}

TEST(ByTime, BalancesForwardPlusBackward) {
  // Forward alone would pair {0,1} | {2}; the backward of layer 0 makes it the heavy one.
  std::vector<LayerCost> costs(3);
  costs[0].set_forward_time(1).set_backward_time(9);
  costs[1].set_forward_time(1).set_backward_time(1);
  costs[2].set_forward_time(5).set_backward_time(1);
  EXPECT_EQ(by_time(costs, 2), Partition({1, 2}));
}

TEST(ByParams, IgnoresTime) {
  std::vector<LayerCost> costs(4);
  for (auto& c : costs) c.set_forward_time(100).set_parameter_bytes(1);
  costs[3].set_parameter_bytes(3).set_forward_time(0);
  EXPECT_EQ(by_params(costs, 2), Partition({3, 1}));
}

TEST(ByMemory, WeighsActivationsByTheInFlightFactor) {
  // Nine equal layers; stage 0 keeps 3 micro-batches in flight, stage 1 one.
  // Stage 0 with k layers holds 4k bytes, stage 1 holds 2(9 - k): k = 3 gives 12 | 12.
  std::vector<LayerCost> costs(9);
  for (auto& c : costs) c.set_parameter_bytes(1).set_activation_bytes(1);
  const auto options = BalanceOptions().set_activations_in_flight({3, 1});
  const Partition p = by_memory(costs, 2, options);
  EXPECT_EQ(p, Partition({3, 6}));
  EXPECT_EQ(by_memory(costs, 2), Partition({5, 4}));
}

}  // namespace
}  // namespace baton::partition
