#include "baton/sim/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"

namespace baton::sim {
namespace {

using schedule::ActionKind;

const trace::Event& find(const Result& r, int rank, ActionKind kind, int mb) {
  for (const auto& e : r.timeline.events)
    if (e.rank == rank && e.kind == kind && e.microbatch == mb) return e;
  throw Error("event not found");
}

// Two ranks, two micro-batches, GPipe, F=1 B=2 comm=0.5, worked out by hand:
// rank 0: F0 [0,1] F1 [1,2]; rank 1: F0 [1.5,2.5] F1 [2.5,3.5] B0 [3.5,5.5]
// B1 [5.5,7.5]; rank 0: B0 [6,8] (gradient of B0 arrives 5.5 + 0.5), B1 [8,10].
TEST(Simulator, GPipeWithCommunicationMatchesAHandWorkedTimeline) {
  const auto s = schedule::lower(
      schedule::gpipe(schedule::GeneratorOptions{}.set_ranks(2).set_microbatches(2)));
  const Result r = simulate(s, uniform_cost_model(s, 1, 2, 1, 0.5));
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::F, 1).end, 2);
  EXPECT_DOUBLE_EQ(find(r, 1, ActionKind::F, 0).start, 1.5);
  EXPECT_DOUBLE_EQ(find(r, 1, ActionKind::F, 1).start, 2.5);
  EXPECT_DOUBLE_EQ(find(r, 1, ActionKind::B, 1).end, 7.5);
  EXPECT_DOUBLE_EQ(find(r, 0, ActionKind::B, 0).start, 6);
  EXPECT_DOUBLE_EQ(r.stats.makespan, 10);
  EXPECT_DOUBLE_EQ(r.stats.busy[0], 6);
  EXPECT_DOUBLE_EQ(r.stats.bubble_fraction, 1.0 - 12.0 / 20.0);
  EXPECT_DOUBLE_EQ(r.stats.idle_within_span[1], (7.5 - 1.5) - 6);
}

TEST(Simulator, ComputeOnlyAndLoweredSchedulesGiveTheSameTimeline) {
  const auto compute =
      schedule::one_f_one_b(schedule::GeneratorOptions{}.set_ranks(4).set_microbatches(6));
  const auto lowered = schedule::lower(compute);
  const Result a = simulate(compute, uniform_cost_model(compute, 1, 3, 1, 0.25));
  const Result b = simulate(lowered, uniform_cost_model(lowered, 1, 3, 1, 0.25));
  EXPECT_DOUBLE_EQ(a.stats.makespan, b.stats.makespan);
  ASSERT_EQ(a.timeline.events.size(), b.timeline.events.size());
  for (size_t i = 0; i < a.timeline.events.size(); ++i) {
    EXPECT_DOUBLE_EQ(a.timeline.events[i].start, b.timeline.events[i].start);
  }
}

// I frees what W does not need; W frees the rest.
TEST(Simulator, ActivationBytesStayUntilTheirBackwardAndStashUntilW) {
  const auto s = schedule::parse_schedule("0F0 0F1 0I0 0W0 0I1 0W1\n");
  CostModel costs;
  StageCost stage;
  stage.activation_bytes = 10;
  stage.weight_stash_bytes = 4;
  costs.stages = {stage};
  const Result r = simulate(s, costs);
  EXPECT_DOUBLE_EQ(r.stats.peak_activation_bytes[0], 20);
  EXPECT_EQ(r.stats.peak_inflight[0], 2);
}

TEST(Simulator, PeakActivationBytesOfGPipeGrowWithMicrobatches) {
  for (int m : {1, 4, 9}) {
    const auto s = schedule::lower(
        schedule::gpipe(schedule::GeneratorOptions{}.set_ranks(3).set_microbatches(m)));
    const Result r = simulate(s, uniform_cost_model(s, 1, 2, 1));
    for (int rank = 0; rank < 3; ++rank) {
      EXPECT_DOUBLE_EQ(r.stats.peak_activation_bytes[rank], m);
      EXPECT_EQ(r.stats.peak_inflight[rank], m);
    }
  }
}

TEST(Simulator, ACostModelWithTheWrongStageCountIsRejected) {
  const auto s =
      schedule::one_f_one_b(schedule::GeneratorOptions{}.set_ranks(2).set_microbatches(2));
  CostModel costs;
  costs.stages.resize(3);
  try {
    simulate(s, costs);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cost model has 3 stages"), std::string::npos);
  }
}

TEST(Simulator, UniformCostsRejectAWeightTimeLargerThanTheBackward) {
  const auto s =
      schedule::one_f_one_b(schedule::GeneratorOptions{}.set_ranks(2).set_microbatches(2));
  EXPECT_THROW(uniform_cost_model(s, 1, 1, 2), Error);
}

TEST(Simulator, BandwidthAddsBytesOverBandwidthToEachHop) {
  const auto s = schedule::lower(
      schedule::gpipe(schedule::GeneratorOptions{}.set_ranks(2).set_microbatches(1)));
  CostModel costs = uniform_cost_model(s, 1, 2, 1, 0.5);
  costs.comm_bytes_per_time = 4;
  costs.stages[0].boundary_bytes = 2;  // 0.5 + 2 / 4 = 1 per hop
  const Result r = simulate(s, costs);
  // F0 [0,1], hop 1, F1 [2,3], B1 [3,5], hop 1, B0 [6,8].
  EXPECT_DOUBLE_EQ(r.stats.makespan, 8);
}

std::string simulate_error(const schedule::Schedule& s, const CostModel& costs) {
  try {
    simulate(s, costs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Issue 7.9: tf = tb = 1e308 gave makespan inf and bubble nan.
TEST(Simulator, RefusesCostsThatAddUpPastTheLimitInsteadOfOverflowing) {
  const auto s = schedule::lower(
      schedule::one_f_one_b(schedule::GeneratorOptions{}.set_ranks(4).set_microbatches(8)));
  EXPECT_NE(simulate_error(s, uniform_cost_model(s, 1e308, 1e308, 1))
                .find("[sim.costs] schedule \"1f1b\": the times of its 160 actions and their "
                      "transfers add up to inf, more than the limit of 1e+300"),
            std::string::npos);
  EXPECT_NE(simulate_error(s, uniform_cost_model(s, 1, 2, 1, 1e299)).find("more than the limit"),
            std::string::npos);
  const Result r = simulate(s, uniform_cost_model(s, 1e290, 1e290, 0));
  EXPECT_TRUE(std::isfinite(r.stats.makespan));
  EXPECT_TRUE(std::isfinite(r.stats.bubble_fraction));
}

TEST(Simulator, RefusesAStageCostThatIsNotFinite) {
  const auto s =
      schedule::one_f_one_b(schedule::GeneratorOptions{}.set_ranks(2).set_microbatches(2));
  CostModel costs = uniform_cost_model(s, 1, 2, 1);
  costs.stages[1].weight_backward = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(simulate_error(s, costs).find("[sim.costs] stage 1: costs must be finite"),
            std::string::npos);
  costs = uniform_cost_model(s, 1, 2, 1);
  costs.stages[0].activation_bytes = std::numeric_limits<double>::infinity();
  EXPECT_NE(simulate_error(s, costs).find("[sim.costs] stage 0: costs must be finite"),
            std::string::npos);
}

TEST(Simulator, UniformCostsRejectInfiniteTimes) {
  const auto s =
      schedule::one_f_one_b(schedule::GeneratorOptions{}.set_ranks(2).set_microbatches(2));
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THROW(uniform_cost_model(s, inf, inf, 1), Error);
  EXPECT_THROW(uniform_cost_model(s, 1, 2, 1, inf), Error);
}

}  // namespace
}  // namespace baton::sim
