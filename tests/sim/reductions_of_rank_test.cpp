// trace::reductions_of_rank, which the executor and --compare-sim use on
// measured timelines, against the simulator's own per-rank statistics on
// the timelines it simulates (Stats::reduce_grad and exposed_reduction),
// which it computes as it schedules, not from the timeline.
#include <gtest/gtest.h>

#include <string>

#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/sim/simulator.h"
#include "baton/trace/timeline.h"

namespace baton::trace {
namespace {

void expect_matches_simulator(const std::string& name, int pp, int m, int v, double mib) {
  schedule::GeneratorOptions options;
  options.ranks = pp;
  options.microbatches = m;
  options.virtual_stages = v;
  const schedule::Schedule plain = schedule::generate(name, options);
  const schedule::Schedule reduced =
      schedule::add_grad_reductions(plain, 2, std::vector<int>(plain.stages, 2));
  sim::CostModel costs = sim::uniform_cost_model(reduced, 1, 2, 1, 0.1);
  costs.dp = 2;
  costs.dp_link = sim::Link{0.01, 1 << 20};  // 1 MiB per time unit
  for (auto& stage : costs.stages) stage.bucket_bytes = {mib * (1 << 20), mib * (1 << 20) / 2};
  const sim::Result result = sim::simulate(reduced, costs);
  for (int r = 0; r < pp; ++r) {
    const Reductions got = reductions_of_rank(result.timeline.events, r);
    SCOPED_TRACE(name + " rank " + std::to_string(r));
    EXPECT_NEAR(got.total, result.stats.reduce_grad[r], 1e-9);
    EXPECT_NEAR(got.exposed, result.stats.exposed_reduction[r], 1e-9);
    EXPECT_GT(got.total, 0);
  }
}

TEST(ReductionsOfRankTest, EqualsTheSimulatorsStatisticsOnOneChunkPerRank) {
  expect_matches_simulator("1f1b", 4, 8, 1, 4);  // all exposed: the last compute is the last B
}

TEST(ReductionsOfRankTest, EqualsTheSimulatorsStatisticsOnInterleaved) {
  expect_matches_simulator("interleaved", 2, 8, 2, 1);  // partly hidden
  expect_matches_simulator("interleaved", 4, 8, 2, 8);
}

TEST(ReductionsOfRankTest, UnionOfOverlappingSpansAndNoneWithoutReductions) {
  const std::vector<Event> events = {{0, 0, 0, schedule::ActionKind::B, 0, 5},
                                     {0, 0, 0, schedule::ActionKind::REDUCE_GRAD, 4, 8},
                                     {0, 0, 1, schedule::ActionKind::REDUCE_GRAD, 6, 9},
                                     {0, 0, 2, schedule::ActionKind::REDUCE_GRAD, 10, 11},
                                     {1, 1, 0, schedule::ActionKind::REDUCE_GRAD, 0, 100}};
  const Reductions got = reductions_of_rank(events, 0);
  EXPECT_DOUBLE_EQ(got.total, 5 + 1);  // [4, 9] and [10, 11]
  EXPECT_DOUBLE_EQ(got.exposed, 11 - 5);
  EXPECT_DOUBLE_EQ(reductions_of_rank(events, 2).total, 0);
}

}  // namespace
}  // namespace baton::trace
