#include "baton/partition/balance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "brute_force.h"

namespace baton::partition {
namespace {

using ::testing::HasSubstr;

using testing::error_of;

std::vector<LayerCost> random_layers(int layers, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> draw(0.1, 10.0);
  std::vector<LayerCost> costs(layers);
  for (auto& c : costs) {
    c.set_forward_time(draw(rng))
        .set_backward_time(draw(rng))
        .set_parameter_bytes(draw(rng))
        .set_activation_bytes(draw(rng))
        .set_output_bytes(draw(rng));
  }
  return costs;
}

TEST(Balance, DispatchesEveryMethodByName) {
  const auto costs = random_layers(10, 1);
  const auto options = BalanceOptions().set_comm_latency(2).set_activations_in_flight({3, 2, 1});
  EXPECT_EQ(balance("uniform", costs, 3, options), uniform(10, 3));
  EXPECT_EQ(balance("params", costs, 3, options), by_params(costs, 3));
  EXPECT_EQ(balance("time", costs, 3, options), by_time(costs, 3));
  EXPECT_EQ(balance("memory", costs, 3, options), by_memory(costs, 3, options));
  EXPECT_EQ(balance("optimal", costs, 3, options), optimal(costs, 3, options));
}

TEST(Balance, TheMethodsDisagreeOnUnevenLayers) {
  // Otherwise the dispatch test above could pass with every name mapped to one method.
  auto costs = random_layers(10, 1);
  const auto options =
      BalanceOptions().set_comm_bytes_per_time(1).set_activations_in_flight({3, 2, 1});
  // A huge boundary after layer 2, where by_time cuts, steers optimal elsewhere.
  ASSERT_EQ(by_time(costs, 3).first_layer(1), 3);
  costs[2].set_output_bytes(1000);
  EXPECT_NE(by_params(costs, 3), by_time(costs, 3));
  EXPECT_NE(by_memory(costs, 3, options), by_params(costs, 3));
  EXPECT_NE(optimal(costs, 3, options), by_time(costs, 3));
  EXPECT_NE(uniform(10, 3), by_time(costs, 3));
}

TEST(Balance, ListsItsMethods) {
  EXPECT_EQ(method_names(),
            (std::vector<std::string>{"uniform", "params", "time", "memory", "optimal"}));
}

// needs_layer_costs (what the Pipeline and the CLI read to profile first)
// against what each method does: one that needs none cuts any costs alike,
// one that needs them cuts some pair of cost tables differently.
TEST(Balance, ProfilesExactlyForTheMethodsThatReadTheCosts) {
  for (const std::string method : {"uniform", "params", "time", "memory", "optimal", "3,5,4"}) {
    std::set<std::vector<int>> cuts;
    for (int seed = 1; seed <= 8; ++seed)
      cuts.insert(balance(method, random_layers(12, seed), 3).layers_per_stage());
    EXPECT_EQ(needs_layer_costs(method), cuts.size() > 1) << method;
  }
}

TEST(Balance, ReadsHandWrittenCounts) {
  const auto costs = random_layers(12, 2);
  EXPECT_EQ(balance("3,5,4", costs, 3), Partition({3, 5, 4}));
  EXPECT_EQ(balance("12", costs, 1), Partition({12}));
  EXPECT_EQ(error_of([&] { balance("3,5", costs, 2); }),
            "[partition.balance] --balance 3,5 sums to 8 layers but the model has 12");
  EXPECT_THAT(error_of([&] { balance("-1,13", costs, 2); }), HasSubstr("stage 0 has -1 layers"));
}

TEST(Balance, RejectsAnUnknownMethodListingTheKnownOnes) {
  EXPECT_EQ(error_of([] { balance("greedy", random_layers(4, 3), 2); }),
            "[partition.balance] unknown method \"greedy\" (known: uniform, params, time, memory, "
            "optimal, or comma-separated layer counts such as 3,5,4)");
}

TEST(Balance, RejectsMoreStagesThanLayersForEveryMethod) {
  const auto costs = random_layers(3, 4);
  for (const std::string method : {"uniform", "params", "time", "memory", "optimal", "1,1,1,1,1"}) {
    EXPECT_EQ(
        error_of([&] { balance(method, costs, 5); }),
        "[partition] 5 stages but the model has only 3 layers; every stage needs at least one "
        "layer")
        << method;
  }
  EXPECT_EQ(error_of([] { balance("time", {}, 1); }),
            "[partition] 1 stage but the model has only 0 layers; every stage needs at least one "
            "layer");
}

TEST(Balance, RejectsZeroStages) {
  EXPECT_EQ(error_of([] { balance("optimal", random_layers(3, 5), 0); }),
            "[partition] the pipeline needs at least 1 stage, got 0");
}

TEST(Balance, EveryMethodGivesOneStageAllLayersAndSEqualLGivesOneEach) {
  const auto costs = random_layers(6, 6);
  for (const std::string& method : method_names()) {
    EXPECT_EQ(balance(method, costs, 1), Partition({6})) << method;
    EXPECT_EQ(balance(method, costs, 6), Partition(std::vector<int>(6, 1))) << method;
  }
}

TEST(Balance, RejectsNegativeOrNonFiniteCostsNamingTheLayer) {
  auto costs = random_layers(4, 7);
  costs[2].backward_time = -1;
  EXPECT_EQ(
      error_of([&] { balance("time", costs, 2); }),
      "[partition] layer 2: backward_time is -1; layer costs must be finite and non-negative");
  costs[2].backward_time = 1;
  costs[3].output_bytes = std::numeric_limits<double>::infinity();
  EXPECT_THAT(error_of([&] { balance("optimal", costs, 2); }),
              HasSubstr("layer 3: output_bytes is inf"));
}

TEST(Balance, RejectsMalformedOptions) {
  const auto costs = random_layers(4, 8);
  EXPECT_EQ(error_of([&] {
              balance("optimal", costs, 2, BalanceOptions().set_activations_in_flight({1, 2, 3}));
            }),
            "[partition] activations_in_flight has 3 entries but the pipeline has 2 stages");
  EXPECT_THAT(
      error_of([&] { balance("optimal", costs, 2, BalanceOptions().set_comm_latency(-1)); }),
      HasSubstr("comm_latency must be finite and non-negative, got -1"));
  EXPECT_THAT(
      error_of([&] { balance("optimal", costs, 2, BalanceOptions().set_memory_cap_bytes(-5)); }),
      HasSubstr("memory_cap_bytes must be finite and non-negative (0 = no cap), got -5"));
  EXPECT_THAT(error_of([&] {
                balance("memory", costs, 2, BalanceOptions().set_activations_in_flight({1, -1}));
              }),
              HasSubstr("activations_in_flight of stage 1 is -1"));
}

TEST(Balance, OneFOneBInFlightCountsDownFromTheStages) {
  EXPECT_EQ(one_f_one_b_in_flight(4), (std::vector<double>{4, 3, 2, 1}));
}

}  // namespace
}  // namespace baton::partition
