// ZeRO's actions in the schedule (schedule/sharding.h): add_sharding places
// one UNSHARD per (rank, stage) one compute ahead of the stage's first
// compute there, one RESHARD (ZeRO-3) after its last weight backward and its
// reductions, and turns REDUCE_GRAD into REDUCE_SCATTER for ZeRO-2/3, on
// every synchronous schedule; the validator refuses a compute of a stage
// outside its UNSHARD..RESHARD; the text form reads PyTorch's "1UNSHARD";
// and the simulator charges UNSHARD a ring all-gather on the communication
// stream that the stage's first compute waits for (against hand
// computation).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/sharding.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"
#include "baton/sim/simulator.h"

namespace baton::schedule {
namespace {

using testing::HasSubstr;

Schedule reduced(const std::string& name, int ranks, int microbatches) {
  const Schedule lowered =
      lower(generate(name, GeneratorOptions().set_ranks(ranks).set_microbatches(microbatches)));
  return add_grad_reductions(lowered, 2, std::vector<int>(lowered.stages, 2));
}

class Sharding : public testing::TestWithParam<std::string> {};

TEST_P(Sharding, PlacesOneUnshardBeforeAndOneReshardAfterEachStagesComputeOnEachRank) {
  const Schedule base = reduced(GetParam(), 4, 8);
  for (int zero : {1, 2, 3}) {
    const Schedule s = add_sharding(base, zero);
    for (int r = 0; r < s.ranks; ++r) {
      const auto& list = s.actions[r];
      std::map<int, int> unshards, reshards, first_compute, last_compute, last_weight;
      std::map<int, int> unshard_at, reshard_at;
      int grad_reductions = 0, scatters = 0;
      for (int i = 0; i < static_cast<int>(list.size()); ++i) {
        const Action& a = list[i];
        if (a.kind == ActionKind::UNSHARD) ++unshards[a.stage], unshard_at[a.stage] = i;
        if (a.kind == ActionKind::RESHARD) ++reshards[a.stage], reshard_at[a.stage] = i;
        grad_reductions += a.kind == ActionKind::REDUCE_GRAD;
        scatters += a.kind == ActionKind::REDUCE_SCATTER;
        if (!is_compute(a.kind)) continue;
        if (!first_compute.count(a.stage)) first_compute[a.stage] = i;
        last_compute[a.stage] = i;
      }
      EXPECT_EQ(zero >= 2 ? grad_reductions : scatters, 0) << GetParam() << " rank " << r;
      EXPECT_GT(zero >= 2 ? scatters : grad_reductions, 0) << GetParam() << " rank " << r;
      for (const auto& [stage, first] : first_compute) {
        EXPECT_EQ(unshards[stage], 1) << GetParam() << " rank " << r << " stage " << stage;
        EXPECT_LT(unshard_at[stage], first);
        // Prefetched: at most one compute action lies between them.
        int computes_between = 0;
        for (int i = unshard_at[stage] + 1; i < first; ++i)
          computes_between += is_compute(list[i].kind);
        EXPECT_LE(computes_between, 1) << GetParam() << " rank " << r << " stage " << stage;
        EXPECT_EQ(reshards[stage], zero == 3 ? 1 : 0);
        if (zero == 3) EXPECT_GT(reshard_at[stage], last_compute[stage]);
      }
    }
  }
}

// The runtime's memory prediction (train/trainer.cpp) takes a ZeRO-3 rank's
// parameters as its shards plus every one of its stages whole. The
// simulator's walk over UNSHARD and RESHARD agrees for every schedule: a
// stage stays gathered for the whole step, so a rank's stages overlap.
// Stage s holds 8 (s + 1) bytes, dp = 4.
TEST_P(Sharding, EveryStageOfARankIsGatheredAtOnceAtItsPeak) {
  const Schedule lowered =
      lower(generate(GetParam(), GeneratorOptions().set_ranks(4).set_microbatches(8)));
  const Schedule s =
      add_sharding(add_grad_reductions(lowered, 4, std::vector<int>(lowered.stages, 1)), 3);
  sim::CostModel costs = sim::uniform_cost_model(s, 1, 2, 1);
  for (size_t stage = 0; stage < costs.stages.size(); ++stage)
    costs.stages[stage].parameter_bytes = 8.0 * (stage + 1);
  costs.dp = 4;
  const sim::Stats stats = sim::simulate(s, costs).stats;
  for (int r = 0; r < s.ranks; ++r) {
    std::set<int> held;
    for (const Action& a : s.actions[r])
      if (is_compute(a.kind)) held.insert(a.stage);
    double whole = 0;
    for (int stage : held) whole += 8.0 * (stage + 1);
    EXPECT_DOUBLE_EQ(stats.peak_parameter_bytes[r], whole / 4 + whole)
        << GetParam() << " rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, Sharding,
                         testing::Values("gpipe", "1f1b", "interleaved", "interleaved-zb", "zb-h1",
                                         "zb-h2", "zb-v", "v-half", "v-min", "dualpipev",
                                         "chimera"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             if (c == '-') c = '_';
                           return s;
                         });

TEST(Sharding, WithoutGradientReductionsOrAtZero0ChangesNothing) {
  const Schedule lowered =
      lower(generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(4)));
  EXPECT_EQ(add_sharding(lowered, 3).actions, lowered.actions);
  const Schedule r = reduced("1f1b", 2, 4);
  EXPECT_EQ(add_sharding(r, 0).actions, r.actions);
  EXPECT_THROW(add_sharding(r, 4), Error);
  EXPECT_THROW(add_sharding(r, -1), Error);
}

TEST(Sharding, TheValidatorRefusesAComputeOutsideItsUnshardAndReshard) {
  const Schedule s = add_sharding(reduced("1f1b", 2, 2), 3);
  // Rank 1's RESHARD moved before its last backward.
  Schedule early = s;
  auto& list = early.actions[1];
  const auto reshard = std::find_if(list.begin(), list.end(),
                                    [](const Action& a) { return a.kind == ActionKind::RESHARD; });
  ASSERT_NE(reshard, list.end());
  const Action moved = *reshard;
  list.erase(reshard);
  list.insert(list.begin() + 1, moved);
  try {
    validate(early);
    FAIL() << "a RESHARD before the stage's backwards was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("freed only after its last compute"));
  }
  // Rank 0 without its UNSHARD.
  Schedule missing = s;
  auto& first = missing.actions[0];
  first.erase(std::find_if(first.begin(), first.end(),
                           [](const Action& a) { return a.kind == ActionKind::UNSHARD; }));
  try {
    validate(missing);
    FAIL() << "a stage computed without its UNSHARD was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("without an UNSHARD"));
  }
}

TEST(Sharding, TheTextFormReadsPyTorchsUnnumberedActions) {
  EXPECT_EQ(parse_action("1UNSHARD"), (Action{ActionKind::UNSHARD, 1, 0}));
  EXPECT_EQ(parse_action("0RESHARD0"), (Action{ActionKind::RESHARD, 0, 0}));
  EXPECT_EQ(parse_action("2REDUCE_SCATTER1"), (Action{ActionKind::REDUCE_SCATTER, 2, 1}));
  EXPECT_EQ(to_string(Action{ActionKind::UNSHARD, 3, 0}), "3UNSHARD0");
}

// p = 2, m = 2, 1F1B, F = 1, B = 2, dp = 2 at 1e6 bytes per unit, latency
// 0.5, 2e6 parameter bytes per stage: the all-gather takes (2 - 1) * 0.5 +
// 1/2 * 2e6 / 1e6 = 1.5. Each rank's UNSHARD opens its list, so rank 0's F0
// starts at 1.5 instead of 0, and the whole step moves by 1.5.
TEST(SimulateUnshard, TheFirstForwardWaitsForTheAllGather) {
  const Schedule reduced_once = add_grad_reductions(
      lower(generate("1f1b", GeneratorOptions().set_ranks(2).set_microbatches(2))), 2, {1, 1});
  const Schedule s = add_sharding(reduced_once, 3);
  sim::CostModel costs = sim::uniform_cost_model(s, 1, 2, 1);
  for (auto& c : costs.stages) c.parameter_bytes = 2e6;
  costs.dp = 2;
  costs.dp_link = sim::Link{0.5, 1e6};
  EXPECT_DOUBLE_EQ(costs.unshard_time(0), 1.5);
  EXPECT_DOUBLE_EQ(sim::ring_allgather_time(4, 1000, sim::Link{0.5, 100}), 3 * 0.5 + 0.75 * 10);
  const sim::Result with = sim::simulate(s, costs);
  sim::CostModel unsharded = costs;
  const sim::Result without = sim::simulate(reduced_once, unsharded);
  double first_forward = -1;
  for (const auto& e : with.timeline.events)
    if (e.rank == 0 && e.kind == ActionKind::F && e.microbatch == 0) first_forward = e.start;
  EXPECT_DOUBLE_EQ(first_forward, 1.5);
  EXPECT_DOUBLE_EQ(with.stats.makespan, without.stats.makespan + 1.5);
}

// ZeRO-3's parameter memory: a rank holds its stages' 1/dp shards, plus a
// stage's whole parameters from its UNSHARD to its RESHARD. 1F1B (one stage
// a rank): shard + the stage. Interleaved (two chunks a rank, each
// gathered for the whole step): shards + both chunks. dp = 4, 8 bytes a
// stage.
TEST(SimulateUnshard, PeakParameterBytesHoldTheShardsAndTheStagesGathered) {
  for (const std::string name : {"1f1b", "interleaved"}) {
    const Schedule lowered =
        lower(generate(name, GeneratorOptions().set_ranks(2).set_microbatches(4)));
    const Schedule s =
        add_sharding(add_grad_reductions(lowered, 4, std::vector<int>(lowered.stages, 1)), 3);
    sim::CostModel costs = sim::uniform_cost_model(s, 1, 2, 1);
    for (auto& c : costs.stages) c.parameter_bytes = 8;
    costs.dp = 4;
    const sim::Stats stats = sim::simulate(s, costs).stats;
    const double chunks = lowered.stages / 2;
    for (int r = 0; r < 2; ++r) {
      EXPECT_DOUBLE_EQ(stats.parameter_bytes[r], 8 * chunks) << name;
      EXPECT_DOUBLE_EQ(stats.peak_parameter_bytes[r], 8 * chunks / 4 + 8 * chunks) << name;
    }
    // Without RESHARD (ZeRO-1) the weights stay whole.
    const sim::Stats one =
        sim::simulate(
            add_sharding(add_grad_reductions(lowered, 4, std::vector<int>(lowered.stages, 1)), 1),
            costs)
            .stats;
    EXPECT_EQ(one.peak_parameter_bytes, one.parameter_bytes) << name;
  }
}

}  // namespace
}  // namespace baton::schedule
