// 2bw (PipeDream-2BW): 1F1B without a flush. Checked against the 1F1B order
// it continues (unrolled, each rank runs 1F1B's warm-up once and then one F
// and one B in turn across steps) and against the papers' figures: no bubble
// in the steady state, 1F1B's p - r micro-batches in flight on rank r.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/unroll.h"
#include "baton/schedule/validate.h"
#include "baton/sim/simulator.h"

namespace baton::schedule {
namespace {

Schedule two_bw_of(int p, int m) {
  return generate("2bw", GeneratorOptions().set_ranks(p).set_microbatches(m));
}

// The no-flush 1F1B stream of rank r over `total` micro-batches: p - r - 1
// forwards, then one forward and one backward in turn, then the backwards left.
std::vector<Action> stream(int p, int r, int total) {
  std::vector<Action> out;
  const int lag = p - r - 1;
  for (int j = 0; j < total; ++j) {
    out.push_back({ActionKind::F, r, j});
    if (j - lag >= 0) out.push_back({ActionKind::B, r, j - lag});
  }
  for (int j = std::max(0, total - lag); j < total; ++j) out.push_back({ActionKind::B, r, j});
  return out;
}

TEST(TwoBw, UnrolledIsOneF1BWithoutAFlush) {
  for (int p : {1, 2, 3, 4, 5}) {
    for (int m : {p, p + 3, 2 * p}) {
      const Schedule window = two_bw_of(p, m);
      EXPECT_TRUE(window.carries);
      for (int steps : {1, 2, 3}) {
        const Schedule flat = unroll(window, steps);
        EXPECT_FALSE(flat.carries);
        EXPECT_EQ(flat.microbatches, steps * m);
        for (int r = 0; r < p; ++r) {
          EXPECT_EQ(flat.actions[r], stream(p, r, steps * m))
              << "p=" << p << " m=" << m << " steps=" << steps << " rank " << r;
        }
        EXPECT_NO_THROW(validate(flat));
      }
    }
  }
}

TEST(TwoBw, CarriesTheLastBackwardsOfAStepOnEachRank) {
  const Schedule window = two_bw_of(4, 6);
  const auto carried = carried_actions(window);
  for (int r = 0; r < 4; ++r) {
    int carried_backwards = 0;
    for (size_t i = 0; i < window.actions[r].size(); ++i) {
      if (!carried[r][i]) continue;
      ++carried_backwards;
      EXPECT_EQ(window.actions[r][i].kind, ActionKind::B);
      EXPECT_GE(window.actions[r][i].microbatch, 6 - (4 - r - 1));
    }
    EXPECT_EQ(carried_backwards, 4 - r - 1) << "rank " << r;
  }
  // Lowered, the RECV_B and SEND_B of a carried backward are carried too.
  const Schedule lowered = lower(window);
  EXPECT_TRUE(lowered.carries);
  const auto lowered_carried = carried_actions(lowered);
  for (int r = 0; r < 4; ++r) {
    for (size_t i = 0; i < lowered.actions[r].size(); ++i) {
      const ActionKind k = lowered.actions[r][i].kind;
      if (k == ActionKind::F || k == ActionKind::RECV_F || k == ActionKind::SEND_F) {
        EXPECT_FALSE(lowered_carried[r][i]);
      }
    }
  }
}

TEST(TwoBw, RefusesFewerMicrobatchesThanRanks) {
  try {
    two_bw_of(4, 3);
    FAIL() << "2bw accepted m = 3 at p = 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at least pp micro-batches"), std::string::npos)
        << e.what();
  }
}

TEST(TwoBw, ValidatorCatchesABrokenWindow) {
  Schedule window = two_bw_of(2, 4);
  // Rank 1 runs 1B0 before 1F0: carried, so step t's micro-batch 0 leaves
  // rank 1 only in step t + 1, while rank 0 waits for it in step t before its
  // forwards of micro-batches 2 and 3, which rank 1 needs to end step t.
  auto& last = window.actions[1];
  std::swap(last[0], last[1]);
  try {
    validate(window);
    FAIL() << "a deadlocking window passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("deadlock"), std::string::npos) << e.what();
  }
}

// The simulator: one step of 2bw from an empty pipeline is one 1F1B step (same
// makespan and peak memory, p - r on rank r), and back to back the steps cost
// m (F + B) each: no bubble (PipeDream-2BW's steady state), where 1F1B's flush
// costs (m + p - 1)(F + B).
TEST(TwoBw, SteadyStateHasNoBubble) {
  for (int p : {2, 4}) {
    for (int m : {p, 2 * p, 8}) {
      const auto opts = GeneratorOptions().set_ranks(p).set_microbatches(m);
      const Schedule w = lower(generate("2bw", opts));
      const Schedule f = lower(generate("1f1b", opts));
      const double tf = 1, tb = 2;
      const sim::Stats two_bw = sim::simulate(w, sim::uniform_cost_model(w, tf, tb, 0, 0)).stats;
      const sim::Stats flush = sim::simulate(f, sim::uniform_cost_model(f, tf, tb, 0, 0)).stats;
      EXPECT_DOUBLE_EQ(two_bw.makespan, flush.makespan) << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(flush.makespan, (m + p - 1) * (tf + tb));
      EXPECT_DOUBLE_EQ(two_bw.steady_step, m * (tf + tb)) << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(flush.steady_step, (m + p - 1) * (tf + tb));
      for (int r = 0; r < p; ++r) EXPECT_EQ(two_bw.peak_inflight[r], p - r) << "rank " << r;
    }
  }
}

// With communication charged, the steps still overlap: between each rank's
// busy time and 1F1B's flushed step.
TEST(TwoBw, SteadyStateWithCommunicationBeatsTheFlush) {
  const auto opts = GeneratorOptions().set_ranks(4).set_microbatches(8);
  const Schedule w = lower(generate("2bw", opts));
  const Schedule f = lower(generate("1f1b", opts));
  const sim::Stats s = sim::simulate(w, sim::uniform_cost_model(w, 1, 2, 0, 0.25)).stats;
  const sim::Stats flush = sim::simulate(f, sim::uniform_cost_model(f, 1, 2, 0, 0.25)).stats;
  EXPECT_GE(s.steady_step, 8 * 3.0);
  EXPECT_LT(s.steady_step, flush.steady_step);
}

}  // namespace
}  // namespace baton::schedule
