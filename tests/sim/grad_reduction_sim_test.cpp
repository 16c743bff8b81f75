// The simulator's data- and tensor-parallel charges against hand computation:
// REDUCE_GRAD as a ring all-reduce on the rank's communication stream,
// tensor-parallel all-reduces added to F, B and I; REDUCE_TIED's exchange,
// which starts once its tie group's last member has finished its compute and
// REDUCE_GRADs and costs one message of the tied bytes over the pipeline link
// (nothing for a group on one rank); CLIP_NORM's all-reduce over the world
// once the last rank has finished its reductions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "baton/core/error.h"
#include "baton/schedule/clip_norm.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
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

TEST(RingAllReduce, ChargesBandwidthAndLatencyTermsOfTheRing) {
  const Link link{0.5, 100};
  EXPECT_DOUBLE_EQ(ring_allreduce_time(1, 1000, link), 0);
  EXPECT_DOUBLE_EQ(ring_allreduce_time(2, 1000, link), 2.0 * 1 / 2 * 10 + 2 * 0.5);
  EXPECT_DOUBLE_EQ(ring_allreduce_time(4, 1000, link), 2.0 * 3 / 4 * 10 + 6 * 0.5);
  EXPECT_DOUBLE_EQ(ring_allreduce_time(8, 1000, Link{0.5, 0}), 14 * 0.5);  // infinite bandwidth
  // Megatron: 2 all-reduces per layer.
  EXPECT_DOUBLE_EQ(tp_comm_time(2, 3, 1000, link), 2 * 3 * (10 + 1.0));
}

// p = 2, m = 2, dp = 2, 1F1B with F = 1, B = 2 (I = W = 1), no p2p cost:
// rank 0: F0 [0,1] F1 [1,2] B0 [4,6] B1 [7,9]; rank 1: F0 [1,2] B0 [2,4]
// F1 [4,5] B1 [5,7]. One bucket of 1e6 bytes per stage over dp = 2 at 1e6
// bytes per unit and latency 0.5: R = 2 * 1/2 * 1 + 2 * 0.5 = 2. Rank 1
// reduces [7, 9] while rank 0 still computes B1; rank 0 reduces [9, 11] after
// its last B, all of it exposed: the step is 9 + R = 11.
TEST(SimulateReduceGrad, OneFOneBOnTwoReplicasMatchesAHandComputation) {
  const auto s = schedule::add_grad_reductions(
      schedule::lower(schedule::generate(
          "1f1b", schedule::GeneratorOptions().set_ranks(2).set_microbatches(2))),
      2, {1, 1});
  CostModel costs = uniform_cost_model(s, 1, 2, 1);
  for (StageCost& c : costs.stages) c.parameter_bytes = 1e6;
  costs.dp = 2;
  costs.dp_link = Link{0.5, 1e6};
  const Result r = simulate(s, costs);
  EXPECT_DOUBLE_EQ(find(r, 1, ActionKind::REDUCE_GRAD, 1, 0).start, 7);
  EXPECT_DOUBLE_EQ(find(r, 1, ActionKind::REDUCE_GRAD, 1, 0).end, 9);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_GRAD, 0, 0).start, 9);
  EXPECT_DOUBLE_EQ(r.stats.makespan, 11);
  EXPECT_DOUBLE_EQ(r.stats.reduce_grad[0], 2);
  EXPECT_DOUBLE_EQ(r.stats.exposed_reduction[0], 2);
  EXPECT_DOUBLE_EQ(r.stats.exposed_reduction[1], 2);
  // Busy time is compute only; the exposed tail is bubble.
  EXPECT_DOUBLE_EQ(r.stats.busy[0], 6);
  EXPECT_DOUBLE_EQ(r.stats.bubble_fraction, 1 - 12.0 / 22.0);
  // Back to back, each step waits for its rank's reductions: rank 0 spans
  // 11 per step (its next F0 starts when its last reduction ends).
  EXPECT_DOUBLE_EQ(r.stats.steady_step, 11);
}

// One rank, two stages (as a V's turn), m = 1, F = 1, B = 2 per stage:
// 0F0 [0,1] 1F0 [1,2] 1B0 [2,4], stage 1's reduction [4, 4+R] overlaps 0B0
// [4,6]; stage 0's waits for the stream: [max(6, 4+R), +R]. With R = 3 the
// step is 10: of 2R = 6 of reduction, 2 overlap 0B0 and 4 are exposed.
TEST(SimulateReduceGrad, ReductionsShareTheRanksStreamAndOverlapItsOtherStagesBackward) {
  const auto s =
      schedule::add_grad_reductions(schedule::parse_schedule("0F0 1F0 1B0 0B0\n"), 2, {1, 1});
  ASSERT_NE(schedule::format_schedule(s).find("\n0F0 1F0 1B0 1REDUCE_GRAD0 0B0 0REDUCE_GRAD0\n"),
            std::string::npos)
      << schedule::format_schedule(s);
  CostModel costs;
  costs.stages.assign(2, StageCost{});  // F = I = W = 1
  for (StageCost& c : costs.stages) c.parameter_bytes = 2;
  costs.dp = 2;
  costs.dp_link = Link{0.5, 1};  // R = 2 * 1/2 * 2 bytes / 1 + 2 * 0.5 = 3
  const Result r = simulate(s, costs);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_GRAD, 1, 0).start, 4);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_GRAD, 1, 0).end, 7);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::B, 0, 0).start, 4);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_GRAD, 0, 0).start, 7);
  EXPECT_DOUBLE_EQ(r.stats.makespan, 10);
  EXPECT_DOUBLE_EQ(r.stats.exposed_reduction[0], 4);
  EXPECT_DOUBLE_EQ(r.stats.reduce_grad[0], 6);
}

TEST(SimulateReduceGrad, BucketsRunInOrderEachPayingTheRingLatency) {
  const auto s = schedule::add_grad_reductions(schedule::parse_schedule("0F0 0B0\n"), 4, {3});
  CostModel costs;
  costs.stages.assign(1, StageCost{});
  costs.stages[0].bucket_bytes = {4, 4, 2};
  costs.dp = 4;
  costs.dp_link = Link{0.25, 1.5};  // R(b) = 1.5 b / 1.5 + 6 * 0.25 = b + 1.5
  const Result r = simulate(s, costs);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_GRAD, 0, 0).end, 3 + 5.5);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::REDUCE_GRAD, 0, 2).start, 3 + 11);
  EXPECT_DOUBLE_EQ(r.stats.makespan, 3 + 5.5 + 5.5 + 3.5);
}

TEST(SimulateReduceGrad, CostsNothingWithOneReplica) {
  const auto s = schedule::add_grad_reductions(schedule::parse_schedule("0F0 0B0\n"), 2, {1});
  CostModel costs;
  costs.stages.assign(1, StageCost{});
  costs.stages[0].parameter_bytes = 1e9;
  costs.dp_link = Link{1, 1};
  EXPECT_DOUBLE_EQ(simulate(s, costs).stats.makespan, 3);  // dp = 1
}

TEST(SimulateReduceGrad, RefusesABucketTheCostModelDoesNotHave) {
  const auto s = schedule::add_grad_reductions(schedule::parse_schedule("0F0 0B0\n"), 2, {2});
  CostModel costs;
  costs.stages.assign(1, StageCost{});
  costs.dp = 2;
  try {
    simulate(s, costs);
    FAIL() << "expected a throw";
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "[sim.costs] 0REDUCE_GRAD1 reduces bucket 1 but the cost model gives stage 0 1 bucket");
  }
}

// GPipe p = 2, m = 1, F = 1, B = 2, tp_comm = 0.5 on F and on B:
// 0F0 [0,1.5] 1F0 [1.5,3] 1B0 [3,5.5] 0B0 [5.5,8].
TEST(SimulateTensorParallel, AddsItsCommunicationToForwardsAndBackwards) {
  const auto s =
      schedule::generate("gpipe", schedule::GeneratorOptions().set_ranks(2).set_microbatches(1));
  CostModel costs = uniform_cost_model(s, 1, 2, 1);
  for (StageCost& c : costs.stages) c.tp_comm = 0.5;
  EXPECT_DOUBLE_EQ(simulate(s, costs).stats.makespan, 8);
  // Split backward: I pays it, W does not.
  const auto split = schedule::parse_schedule("0F0 0I0 0W0\n");
  CostModel one;
  one.stages.assign(1, StageCost{});
  one.stages[0].tp_comm = 0.5;
  EXPECT_DOUBLE_EQ(simulate(split, one).stats.makespan, 1.5 + 1.5 + 1);
}

schedule::Schedule one_f_one_b(int p, int m) {
  return schedule::lower(
      schedule::generate("1f1b", schedule::GeneratorOptions().set_ranks(p).set_microbatches(m)));
}

// p = 2, m = 2, 1F1B with F = 1, B = 2: rank 0's compute ends at 9, rank 1's
// at 7 (above). Stages 0 and 1 tied, 1e6 bytes each
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

// With dp = 2 (one bucket per stage, R = 2 as above):
// rank 1 reduces [7, 9], rank 0 [9, 11]; the tied exchange waits for both,
// [11, 12].
TEST(SimulateReduceTied, WaitsForTheRanksGradientAllReducesFirst) {
  const auto s = schedule::add_tied_reductions(
      schedule::add_grad_reductions(one_f_one_b(2, 2), 2, {1, 1}), {{0, 1}});
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

// The clip after both: each rank starts it when its tied exchange ends (12),
// adds its squares (half of its stage's clip cost of 0.5), the world of 4
// ranks sums them once the last is there (2 (4 - 1) messages at the dp link's
// latency 0.5 = 3: [12.25, 15.25]), and each rank scales (0.25): 15.5.
TEST(SimulateClipNorm, EndsOnEveryRankOneWorldAllReduceAfterTheLastReduction) {
  const auto s = schedule::add_clip_norm(schedule::add_tied_reductions(
      schedule::add_grad_reductions(one_f_one_b(2, 2), 2, {1, 1}), {{0, 1}}));
  CostModel costs = uniform_cost_model(s, 1, 2, 1);
  for (StageCost& c : costs.stages) {
    c.parameter_bytes = c.tied_bytes = 1e6;
    c.clip = 0.5;
  }
  costs.comm_bytes_per_time = 1e6;
  costs.dp = 2;
  costs.dp_link = Link{0.5, 1e6};
  const Result r = simulate(s, costs);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_DOUBLE_EQ(find(r, rank, ActionKind::CLIP_NORM, rank, 0).start, 12) << rank;
    EXPECT_DOUBLE_EQ(find(r, rank, ActionKind::CLIP_NORM, rank, 0).end, 15.5) << rank;
  }
  EXPECT_DOUBLE_EQ(r.stats.makespan, 15.5);
  EXPECT_DOUBLE_EQ(r.stats.busy[0], 6);  // compute only
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
