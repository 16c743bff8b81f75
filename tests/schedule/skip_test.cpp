// Skip connections across stages in the IR (Schedule::skips, Action::skip):
// lower() sends each skip's tensor straight from the stashing stage's rank to
// the popping stage's rank and its gradient back, and nothing through the
// ranks between; the validator wants exactly one of each transfer where the
// two stages are on different ranks and proves the order; the simulator
// times them; the text format carries them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/validate.h"
#include "baton/sim/simulator.h"
#include "error_of.h"

namespace baton::schedule {
namespace {

// validate()'s message, "" when valid.
std::string validate_error(const Schedule& s) {
  return test::error_of([&] { validate(s); });
}

Schedule with_skips(const std::string& name, int p, int m, std::vector<Skip> skips, int v = 0) {
  Schedule s =
      generate(name, GeneratorOptions{}.set_ranks(p).set_microbatches(m).set_virtual_stages(v));
  s.skips = std::move(skips);
  return s;
}

int count(const Schedule& s, int rank, ActionKind kind, int skip) {
  return static_cast<int>(
      std::count_if(s.actions[rank].begin(), s.actions[rank].end(),
                    [&](const Action& a) { return a.kind == kind && a.skip == skip; }));
}

size_t index_of(const Schedule& s, int rank, const Action& action) {
  const auto& list = s.actions[rank];
  return static_cast<size_t>(std::find(list.begin(), list.end(), action) - list.begin());
}

TEST(SkipConnections, LowerSendsStraightToTheConsumerAndTheGradientBack) {
  constexpr int m = 4;
  const Schedule lowered = lower(with_skips("1f1b", 4, m, {{"enc0", 0, 3}}));
  EXPECT_EQ(count(lowered, 0, ActionKind::SEND_F, 0), m);
  EXPECT_EQ(count(lowered, 0, ActionKind::RECV_B, 0), m);
  EXPECT_EQ(count(lowered, 3, ActionKind::RECV_F, 0), m);
  EXPECT_EQ(count(lowered, 3, ActionKind::SEND_B, 0), m);
  // Nothing passes through the ranks between.
  for (int r : {1, 2}) {
    for (ActionKind k :
         {ActionKind::SEND_F, ActionKind::RECV_F, ActionKind::SEND_B, ActionKind::RECV_B})
      EXPECT_EQ(count(lowered, r, k, 0), 0) << "rank " << r;
  }
  for (int mb = 0; mb < m; ++mb) {
    // Received before the pop's forward, sent after the stash's; the gradient likewise back.
    EXPECT_LT(index_of(lowered, 3, {ActionKind::RECV_F, 3, mb, 0}),
              index_of(lowered, 3, {ActionKind::F, 3, mb}));
    EXPECT_GT(index_of(lowered, 0, {ActionKind::SEND_F, 0, mb, 0}),
              index_of(lowered, 0, {ActionKind::F, 0, mb}));
    EXPECT_GT(index_of(lowered, 3, {ActionKind::SEND_B, 3, mb, 0}),
              index_of(lowered, 3, {ActionKind::B, 3, mb}));
    EXPECT_LT(index_of(lowered, 0, {ActionKind::RECV_B, 0, mb, 0}),
              index_of(lowered, 0, {ActionKind::B, 0, mb}));
  }
}

TEST(SkipConnections, ASkipBetweenStagesOfOneRankHasNoTransfers) {
  // Interleaved, p = 2, v = 2: stages 0 and 2 on rank 0, stage 1 and 3 on rank 1.
  const Schedule lowered =
      lower(with_skips("interleaved", 2, 4, {{"same", 0, 2}, {"across", 1, 2}}, 2));
  for (int r : {0, 1}) {
    for (ActionKind k :
         {ActionKind::SEND_F, ActionKind::RECV_F, ActionKind::SEND_B, ActionKind::RECV_B})
      EXPECT_EQ(count(lowered, r, k, 0), 0) << "rank " << r;
  }
  EXPECT_EQ(count(lowered, 1, ActionKind::SEND_F, 1), 4);
  EXPECT_EQ(count(lowered, 0, ActionKind::RECV_F, 1), 4);
}

TEST(SkipConnections, EveryScheduleWithAFlushLowersAndValidatesWithSkips) {
  int checked = 0;
  for (const auto& name : schedule_names()) {
    for (int p : {2, 4}) {
      Schedule s;
      try {
        s = generate(name, GeneratorOptions{}.set_ranks(p).set_microbatches(2 * p));
      } catch (const Error&) {
        continue;  // not defined for (p, m)
      }
      if (s.carries || s.stages < 3) continue;
      s.skips = {{"a", 0, s.stages - 1}, {"b", 1, s.stages - 1}};
      EXPECT_NO_THROW(validate(lower(s))) << name << " p=" << p;
      // Forward only keeps them, forward transfers alone.
      const Schedule eval = lower(forward_only(s, 2 * p));
      EXPECT_EQ(eval.skips, s.skips) << name;
      EXPECT_NO_THROW(validate(eval)) << name;
      ++checked;
    }
  }
  EXPECT_GE(checked, 14);  // every generator with a flush at p = 4, and those with v = 2 at p = 2
}

TEST(SkipConnections, TheValidatorWantsEachTransferOnceAndInOrder) {
  const Schedule good = lower(with_skips("gpipe", 3, 2, {{"x", 0, 2}}));
  // A missing receive.
  Schedule missing = good;
  auto& rank2 = missing.actions[2];
  rank2.erase(std::find(rank2.begin(), rank2.end(), Action{ActionKind::RECV_F, 2, 1, 0}));
  EXPECT_NE(validate_error(missing).find("rank 2 needs exactly one 2RECV_F1@0, found 0"),
            std::string::npos)
      << validate_error(missing);
  // The gradient received before the forward that stashes: a deadlock.
  Schedule early = good;
  auto& rank0 = early.actions[0];
  rank0.erase(std::find(rank0.begin(), rank0.end(), Action{ActionKind::RECV_B, 0, 0, 0}));
  rank0.insert(rank0.begin(), Action{ActionKind::RECV_B, 0, 0, 0});
  EXPECT_NE(validate_error(early).find("deadlock"), std::string::npos) << validate_error(early);
  // A skip naming stages backwards, a duplicate name, an unknown skip.
  Schedule backwards = with_skips("gpipe", 3, 2, {{"x", 2, 1}});
  EXPECT_NE(validate_error(backwards).find("skip 0 (\"x\") goes from stage 2 to stage 1"),
            std::string::npos);
  Schedule twice = with_skips("gpipe", 3, 2, {{"x", 0, 2}, {"x", 1, 2}});
  EXPECT_NE(validate_error(twice).find("skips 0 and 1 are both named \"x\""), std::string::npos);
  Schedule unknown = good;
  unknown.skips.clear();
  EXPECT_NE(validate_error(unknown).find("names skip 0 but the schedule declares no skips"),
            std::string::npos)
      << validate_error(unknown);
  // Regression (issue 30, item 15): the bound is named as the skips that exist.
  Schedule beyond = good;
  for (auto& list : beyond.actions)
    for (Action& a : list)
      if (a.skip == 0) a.skip = 1;
  EXPECT_NE(validate_error(beyond).find("names skip 1 but only skips 0..0 exist"),
            std::string::npos)
      << validate_error(beyond);
}

// The schedules without a flush carry a skip's backward transfers with the
// backwards they belong to; the validator proves the order over three
// unrolled steps and the drain.
TEST(SkipConnections, SchedulesWithoutAFlushCarryTheirSkipsTransfers) {
  int checked = 0;
  for (const std::string name : {"2bw", "pipedream", "async", "pipemare"}) {
    for (int p : {2, 4}) {
      Schedule s = generate(name, GeneratorOptions{}.set_ranks(p).set_microbatches(2 * p));
      ASSERT_TRUE(s.carries) << name;
      s.skips = {{"a", 0, p - 1}};
      const Schedule lowered = lower(s);
      EXPECT_NO_THROW(validate(lowered)) << name << " p=" << p;
      // Rank p - 1 pops "a" and sends its gradient back: once per micro-batch.
      EXPECT_EQ(count(lowered, p - 1, ActionKind::SEND_B, 0), 2 * p) << name;
      EXPECT_EQ(count(lowered, 0, ActionKind::RECV_B, 0), 2 * p) << name;
      // The skip's gradient of micro-batch 0 received on rank 0 before any
      // forward: read as carried from the step before, so the backward that
      // needs it runs first. Refused, naming it.
      Schedule early = lowered;
      auto& rank0 = early.actions[0];
      rank0.erase(std::find(rank0.begin(), rank0.end(), Action{ActionKind::RECV_B, 0, 0, 0}));
      rank0.insert(rank0.begin(), Action{ActionKind::RECV_B, 0, 0, 0});
      EXPECT_NE(validate_error(early).find("0B0 needs 0RECV_B0@0 first"), std::string::npos)
          << name << ": " << validate_error(early);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8);
}

// The simulator times a skip's transfer: sent late, it delays the pop.
TEST(SkipConnections, TheSimulatorWaitsForASkipSentLate) {
  Schedule lowered = lower(with_skips("gpipe", 3, 3, {{"x", 0, 2}}));
  const auto costs = sim::uniform_cost_model(lowered, 1, 2, 0, 0);  // F = 1
  auto start_of_2f0 = [&](const Schedule& s) {
    for (const auto& e : sim::simulate(s, costs).timeline.events)
      if (e.kind == ActionKind::F && e.stage == 2 && e.microbatch == 0) return e.start;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(start_of_2f0(lowered), 2.0);  // after 0F0 and 1F0
  // Rank 0 sends micro-batch 0's skip only after its forward of micro-batch
  // 2, which ends at 3: stage 2 waits for it.
  auto& rank0 = lowered.actions[0];
  rank0.erase(std::find(rank0.begin(), rank0.end(), Action{ActionKind::SEND_F, 0, 0, 0}));
  rank0.insert(rank0.begin() + static_cast<long>(index_of(lowered, 0, {ActionKind::F, 0, 2}) + 1),
               Action{ActionKind::SEND_F, 0, 0, 0});
  validate(lowered);
  EXPECT_DOUBLE_EQ(start_of_2f0(lowered), 3.0);
}

// A skip moves its own bytes: with a link of 1 byte per time unit and no
// latency, a skip of 4 bytes arrives 4 after its stashing forward ends.
TEST(SkipConnections, TheSimulatorChargesASkipItsOwnBytes) {
  const Schedule lowered = lower(with_skips("gpipe", 3, 1, {{"x", 0, 2}}));
  sim::CostModel costs = sim::uniform_cost_model(lowered, 1, 2, 0, 0);  // F = 1
  costs.comm_bytes_per_time = 1;
  for (auto& stage : costs.stages) stage.boundary_bytes = 0.5;  // each boundary 0.5
  auto start_of_2f0 = [&] {
    for (const auto& e : sim::simulate(lowered, costs).timeline.events)
      if (e.kind == ActionKind::F && e.stage == 2 && e.microbatch == 0) return e.start;
    return -1.0;
  };
  // Without its own bytes the skip moves stage 0's boundary (0.5): 2F0 waits
  // only for 1F0, which starts at 1.5 and ends at 2.5, then its 0.5 transfer.
  EXPECT_DOUBLE_EQ(start_of_2f0(), 3.0);
  costs.skip_bytes = {4};  // 0F0 ends at 1, the skip lands at 5
  EXPECT_DOUBLE_EQ(start_of_2f0(), 5.0);
  costs.skip_bytes = {-1};  // below 0: the boundary's again
  EXPECT_DOUBLE_EQ(start_of_2f0(), 3.0);
}

TEST(SkipConnections, TheTextFormatCarriesSkipsAndTheirTransfers) {
  const Schedule lowered = lower(with_skips("1f1b", 3, 3, {{"enc.0", 0, 2}, {"b-1", 1, 2}}));
  const std::string text = format_schedule(lowered);
  EXPECT_NE(text.find("skips=enc.0:0:2,b-1:1:2"), std::string::npos) << text;
  EXPECT_NE(text.find("0SEND_F0@0"), std::string::npos) << text;
  const Schedule back = parse_schedule(text);
  EXPECT_EQ(back.skips, lowered.skips);
  EXPECT_EQ(back.actions, lowered.actions);
  EXPECT_EQ(parse_action("1SEND_F5@3"), (Action{ActionKind::SEND_F, 1, 5, 3}));
  EXPECT_THROW(parse_action("1F5@3"), Error);  // only transfers name a skip
  EXPECT_THROW(parse_action("1SEND_F5@"), Error);
  EXPECT_THROW(parse_schedule("# baton schedule: skips=a:0\n0F0 0B0\n"), Error);
}

}  // namespace
}  // namespace baton::schedule
