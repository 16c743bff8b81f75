// optimal() against brute force over every partition, with and without
// communication and memory caps, and on cases small enough to work by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>

#include "baton/core/error.h"
#include "baton/partition/balance.h"
#include "brute_force.h"

namespace baton::partition {
namespace {

using testing::brute_force;
using ::testing::HasSubstr;
using testing::StageScore;

using testing::error_of;

// The model optimal() documents, written out loop by loop.
struct Oracle {
  const std::vector<LayerCost>& costs;
  int stages;
  BalanceOptions options;

  double in_flight(int s) const {
    return options.activations_in_flight.empty() ? 1.0 : options.activations_in_flight[s];
  }
  double memory(int s, int a, int b) const {
    double bytes = 0;
    for (int i = a; i < b; ++i) {
      bytes += costs[i].parameter_bytes + in_flight(s) * costs[i].activation_bytes;
    }
    return bytes;
  }
  double time(int s, int a, int b) const {
    double t = 0;
    for (int i = a; i < b; ++i) t += costs[i].forward_time + costs[i].backward_time;
    if (s + 1 < stages) {
      double send = options.comm_latency;
      if (options.comm_bytes_per_time > 0)
        send += costs[b - 1].output_bytes / options.comm_bytes_per_time;
      t += 2 * send;  // activation forward, gradient back
    }
    return t;
  }
  StageScore time_score() const {
    return [this](int s, int a, int b) {
      const double cap = options.memory_cap_bytes;
      if (cap > 0 && memory(s, a, b) > cap) return std::numeric_limits<double>::infinity();
      return time(s, a, b);
    };
  }
  StageScore memory_score() const {
    return [this](int s, int a, int b) { return memory(s, a, b); };
  }
};

// (layers, stages)
class OptimalSweep : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(OptimalSweep, MatchesBruteForceWithCommAndMemoryCaps) {
  const auto [layers, stages] = GetParam();
  int infeasible_seen = 0;
  for (int seed = 0; seed < 24; ++seed) {
    std::mt19937 rng(7919 * layers + 31 * stages + seed);
    const bool integers = seed % 2 == 0;
    const auto costs = testing::random_costs(rng, layers, integers);
    BalanceOptions options;
    // Powers of two keep integer costs exact through the division.
    options.comm_latency = (seed / 2) % 3 == 0 ? 0.0 : static_cast<double>(rng() % 4);
    options.comm_bytes_per_time = std::vector<double>{0, 1, 4}[(seed / 6) % 3];
    if (seed % 3 == 1) options.activations_in_flight = one_f_one_b_in_flight(stages);
    if (seed % 3 == 2) {
      for (int s = 0; s < stages; ++s) options.activations_in_flight.push_back(rng() % 4);
    }

    Oracle oracle{costs, stages, options};
    const double leanest = brute_force(layers, stages, oracle.memory_score()).bottleneck;
    // Cap choices: none, exactly the smallest feasible one (exact only for
    // integers), somewhere above it, and just below it.
    const int choice = (seed / 4) % 4;
    double cap = 0;
    if (choice == 1) cap = integers ? leanest : leanest * (1 + 1e-6);
    if (choice == 2) cap = leanest * 1.3;
    const bool below = choice == 3 && integers && leanest >= 1;
    if (below) cap = leanest - 0.5;
    options.memory_cap_bytes = cap;
    oracle.options = options;
    SCOPED_TRACE("seed " + std::to_string(seed) + " cap " + std::to_string(cap));

    if (below) {
      ++infeasible_seen;
      EXPECT_TRUE(std::isinf(brute_force(layers, stages, oracle.time_score()).bottleneck));
      const std::string message = error_of([&] { optimal(costs, stages, options); });
      EXPECT_THAT(message,
                  HasSubstr("[partition.optimal] no partition of " + std::to_string(layers) +
                            " layers into " + std::to_string(stages) + " stages fits"));
      EXPECT_THAT(message, HasSubstr("the smallest feasible cap is " +
                                     std::to_string(static_cast<long long>(leanest)) + " bytes"));
      continue;
    }
    const auto best = brute_force(layers, stages, oracle.time_score());
    ASSERT_TRUE(std::isfinite(best.bottleneck));
    const Partition got = optimal(costs, stages, options);
    SCOPED_TRACE("got " + got.to_string());
    ASSERT_EQ(got.layers(), layers);
    ASSERT_EQ(got.stages(), stages);
    EXPECT_NEAR(testing::bottleneck_of(got, oracle.time_score()), best.bottleneck,
                1e-9 * best.bottleneck);
    if (integers) {
      EXPECT_EQ(got.layers_per_stage(), best.counts);
    }
  }
  if (layers >= 2) {
    EXPECT_GT(infeasible_seen, 0) << "the sweep never tried an infeasible cap";
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, OptimalSweep, ::testing::ValuesIn(testing::sweep_shapes()),
                         [](const auto& info) { return testing::shape_name(info); });

std::vector<LayerCost> equal_layers(int layers, double time = 1) {
  std::vector<LayerCost> costs(layers);
  for (auto& c : costs) c.set_forward_time(time / 2).set_backward_time(time / 2);
  return costs;
}

TEST(Optimal, WithoutCommOrCapBalancesTimeLikeByTime) {
  std::mt19937 rng(5);
  const auto costs = testing::random_costs(rng, 11, false);
  EXPECT_EQ(optimal(costs, 4), by_time(costs, 4));
}

TEST(Optimal, ChargesCommunicationTwiceToEveryStageButTheLast) {
  // Three 1-unit layers, latency 1 each way: {1,2} costs max(1 + 2, 2) = 3,
  // {2,1} costs max(2 + 2, 1) = 4. Without comm the tie rule would pick {2,1}.
  const auto costs = equal_layers(3);
  EXPECT_EQ(optimal(costs, 2), Partition({2, 1}));
  EXPECT_EQ(optimal(costs, 2, BalanceOptions().set_comm_latency(1)), Partition({1, 2}));
}

TEST(Optimal, CutsWhereTheBoundaryActivationIsSmall) {
  // Equal layers, but only layer 2's output is small: cutting after it beats
  // the even cut after layer 1 or 3 once bandwidth is the bottleneck.
  auto costs = equal_layers(6);
  for (auto& c : costs) c.set_output_bytes(100);
  costs[2].set_output_bytes(1);
  const auto options = BalanceOptions().set_comm_bytes_per_time(10);
  EXPECT_EQ(optimal(costs, 2, options), Partition({3, 3}));
  costs[2].set_output_bytes(100);
  costs[1].set_output_bytes(1);
  // {2,4}: max(2 + 0.2, 4) = 4; {3,3}: 3 + 20 = 23.
  EXPECT_EQ(optimal(costs, 2, options), Partition({2, 4}));
}

TEST(Optimal, AMemoryCapForcesAnUnevenSplit) {
  // Equal times; layer 0 alone weighs 10 bytes, the rest 1 each.
  auto costs = equal_layers(6);
  for (auto& c : costs) c.set_parameter_bytes(1);
  costs[0].set_parameter_bytes(10);
  EXPECT_EQ(optimal(costs, 2), Partition({3, 3}));
  EXPECT_EQ(optimal(costs, 2, BalanceOptions().set_memory_cap_bytes(11)), Partition({2, 4}));
  EXPECT_EQ(optimal(costs, 2, BalanceOptions().set_memory_cap_bytes(10)), Partition({1, 5}));
}

TEST(Optimal, AnInfeasibleCapNamesTheCapAndTheSmallestFeasibleOne) {
  auto costs = equal_layers(4);
  for (auto& c : costs) c.set_parameter_bytes(100).set_activation_bytes(10);
  // 1F1B over 2 stages: stage 0 holds 2 micro-batches. Best is {1,3}: 120 | 330 vs {2,2}: 240 |
  // 220.
  const auto options = BalanceOptions().set_memory_cap_bytes(200).set_activations_in_flight(
      one_f_one_b_in_flight(2));
  EXPECT_EQ(error_of([&] { optimal(costs, 2, options); }),
            "[partition.optimal] no partition of 4 layers into 2 stages fits the memory cap of 200 "
            "bytes per stage; the smallest feasible cap is 240 bytes (partition 2,2)");
  EXPECT_EQ(optimal(costs, 2, BalanceOptions(options).set_memory_cap_bytes(240)),
            Partition({2, 2}));
}

TEST(Optimal, PrintsLargeCapsInFullBytes) {
  auto costs = equal_layers(2);
  for (auto& c : costs) c.set_parameter_bytes(3e9);
  EXPECT_THAT(error_of([&] { optimal(costs, 1, BalanceOptions().set_memory_cap_bytes(4e9)); }),
              HasSubstr("memory cap of 4000000000 bytes per stage; the smallest feasible cap is "
                        "6000000000 bytes"));
}

TEST(Optimal, OneStageHoldsEveryLayer) {
  std::mt19937 rng(3);
  const auto costs = testing::random_costs(rng, 7, false);
  EXPECT_EQ(optimal(costs, 1, BalanceOptions().set_comm_latency(5)), Partition({7}));
}

TEST(Optimal, AsManyStagesAsLayersGivesOneLayerEach) {
  std::mt19937 rng(4);
  const auto costs = testing::random_costs(rng, 5, false);
  EXPECT_EQ(optimal(costs, 5, BalanceOptions().set_comm_latency(1)), Partition({1, 1, 1, 1, 1}));
}

TEST(Optimal, BreaksTiesTowardTheEvenestThenEarlierStagesLarger) {
  // All-zero costs: every partition ties, so the counts decide.
  EXPECT_EQ(optimal(std::vector<LayerCost>(7), 3), Partition({3, 2, 2}));
  EXPECT_EQ(optimal(equal_layers(10, 0.1), 4), uniform(10, 4));
}

TEST(Optimal, IsDeterministic) {
  std::mt19937 rng(11);
  const auto costs = testing::random_costs(rng, 12, true);
  const auto options = BalanceOptions().set_comm_latency(1).set_comm_bytes_per_time(2);
  const Partition first = optimal(costs, 4, options);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(optimal(costs, 4, options), first);
}

TEST(Optimal, HandlesTwoHundredLayersQuickly) {
  std::mt19937 rng(12);
  const auto costs = testing::random_costs(rng, 200, false);
  const auto options = BalanceOptions().set_comm_latency(0.5).set_comm_bytes_per_time(3);
  const Partition p = optimal(costs, 16, options);
  EXPECT_EQ(p.layers(), 200);
  EXPECT_EQ(p.stages(), 16);
}

}  // namespace
}  // namespace baton::partition
