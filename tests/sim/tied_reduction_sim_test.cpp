// The simulator's charge for REDUCE_TIED against hand computation: a tie
// group's exchange starts once its last member has finished its compute and
// its REDUCE_GRADs, and costs one message of the tied bytes over the
// pipeline link; a group on one rank sums locally, in no time.
#include <gtest/gtest.h>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/tied_reduction.h"
#include "baton/sim/simulator.h"

namespace baton::sim {
namespace {

using schedule::ActionKind;

const trace::Event& find(const Result& r, int rank, ActionKind kind, int stage, int mb) {
  for (const auto& e : r.timeline.events)
    if (e.rank == rank && e.kind == kind && e.stage == stage && e.microbatch == mb) return e;
  throw Error("event not found");
}

schedule::Schedule one_f_one_b(int p, int m) {
  return schedule::lower(schedule::generate("1f1b", schedule::GeneratorOptions().set_ranks(p).set_microbatches(m)));
}

// p = 2, m = 2, 1F1B with F = 1, B = 2: rank 0's compute ends at 9, rank 1's
// at 7 (grad_reduction_sim_test.cpp). Stages 0 and 1 tied, 1e6 bytes each
// way at 1e6 bytes per unit, no latency: the exchange runs [9, 10] and rank 1
// waits for rank 0 from 7 on.
TEST(SimulateReduceTied, ATiedEmbeddingOnTwoRanksEndsOneMessageAfterTheLaterRank) {
  const auto s = schedule::add_tied_reductions(one_f_one_b(2, 2), {{0, 1}});
  CostModel costs = uniform_cost_model(s, 1, 2, 1);
  for (StageCost& c : costs.stages) c.tied_bytes = 1e6;
  costs.comm_bytes_per_time = 1e6;
  const Result r = simulate(s, costs);
  EXPECT_DOUBLE_EQ(find(r, 1, ActionKind::REDUCE_TIED, 1, 0).start, 7);
  EXPECT_DOUBLE_EQ(find(r, 1, ActionKind::REDUCE_TIED, 1, 0).end, 10);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_TIED, 0, 0).start, 9);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_TIED, 0, 0).end, 10);
  EXPECT_DOUBLE_EQ(r.stats.makespan, 10);
  // Busy time is compute only.
  EXPECT_DOUBLE_EQ(r.stats.busy[0], 6);
  EXPECT_DOUBLE_EQ(r.stats.busy[1], 6);
}

// With dp = 2 (one bucket per stage, R = 2 as in grad_reduction_sim_test):
// rank 1 reduces [7, 9], rank 0 [9, 11]; the tied exchange waits for both,
// [11, 12].
TEST(SimulateReduceTied, WaitsForTheRanksGradientAllReducesFirst) {
  const auto s = schedule::add_tied_reductions(schedule::add_grad_reductions(one_f_one_b(2, 2), 2, {1, 1}), {{0, 1}});
  CostModel costs = uniform_cost_model(s, 1, 2, 1);
  for (StageCost& c : costs.stages) c.parameter_bytes = c.tied_bytes = 1e6;
  costs.comm_bytes_per_time = 1e6;
  costs.dp = 2;
  costs.dp_link = Link{0.5, 1e6};
  const Result r = simulate(s, costs);
  EXPECT_DOUBLE_EQ(find(r, 1, ActionKind::REDUCE_TIED, 1, 0).start, 9);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_TIED, 0, 0).start, 11);
  EXPECT_DOUBLE_EQ(r.stats.makespan, 12);
}

// One stage holds both copies: nothing to send.
TEST(SimulateReduceTied, AGroupOnOneRankCostsNothing) {
  const auto plain = one_f_one_b(1, 2);
  const auto s = schedule::add_tied_reductions(plain, {{0, 0}});
  CostModel costs = uniform_cost_model(s, 1, 2, 1, 0.25);
  costs.stages[0].tied_bytes = 1e6;
  costs.comm_bytes_per_time = 1e6;
  EXPECT_DOUBLE_EQ(simulate(s, costs).stats.makespan, simulate(plain, costs).stats.makespan);
}

// Chimera, p = 2: every rank holds both stages, each stage replicated; the
// step ends one stage's exchange after the later rank.
TEST(SimulateReduceTied, ChimerasReplicatedStagesAreCharged) {
  const auto plain = schedule::lower(
      schedule::generate("chimera", schedule::GeneratorOptions().set_ranks(2).set_microbatches(2)));
  const auto s = schedule::add_tied_reductions(plain);
  CostModel costs = uniform_cost_model(s, 1, 2, 1);
  for (StageCost& c : costs.stages) c.tied_bytes = 3e6;
  costs.comm_bytes_per_time = 1e6;
  const Result without = simulate(plain, costs), with = simulate(s, costs);
  EXPECT_DOUBLE_EQ(with.stats.makespan, without.stats.makespan + 3);
}

}  // namespace
}  // namespace baton::sim
