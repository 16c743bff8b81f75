// pipemare's order and the per-stage delays PipeMare scales with
// (schedule/update_delays.h), against hand derivations and against a count
// on the window unrolled into ordinary steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "baton/schedule/generator.h"
#include "baton/schedule/unroll.h"
#include "baton/schedule/update_delays.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {
namespace {

Schedule generated(const char* name, int p, int m) {
  return generate(name, GeneratorOptions().set_ranks(p).set_microbatches(m));
}

TEST(PipeMareOrder, IsAsyncsWindowAndValidatesUnrolled) {
  for (int p : {1, 2, 3, 4, 5}) {
    for (int m : {p, p + 1, 2 * p}) {
      const Schedule s = generated("pipemare", p, m);
      EXPECT_EQ(s.name, "pipemare");
      EXPECT_TRUE(s.carries);
      EXPECT_EQ(s.actions, generated("async", p, m).actions) << "p=" << p << " m=" << m;
      EXPECT_NO_THROW(validate(unroll(s, 3))) << "p=" << p << " m=" << m;
    }
  }
}

// Rank r's window is F(j), B(j - (p - 1 - r)): between F(j) and B(j) it runs
// B(j - (p - 1 - r)) .. B(j - 1), p - 1 - r backwards, each an update.
TEST(UpdateDelays, OneFOneBWithoutAFlushDelaysRankRByPMinusOneMinusR) {
  EXPECT_EQ(update_delays(generated("pipemare", 2, 4)), (std::vector<int>{1, 0}));
  EXPECT_EQ(update_delays(generated("pipemare", 2, 8)), (std::vector<int>{1, 0}));
  EXPECT_EQ(update_delays(generated("pipemare", 4, 4)), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(update_delays(generated("pipemare", 4, 8)), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(update_delays(generated("pipemare", 1, 3)), (std::vector<int>{0}));
  for (const char* name : {"2bw", "pipedream", "async"})
    EXPECT_EQ(update_delays(generated(name, 4, 8)), (std::vector<int>{3, 2, 1, 0})) << name;
}

// The steady state, counted on three steps written out as one ordinary
// schedule: for every micro-batch of the middle step, the B's of its stage
// between its F and its B on the rank's list.
TEST(UpdateDelays, EqualACountOnTheUnrolledSteps) {
  for (int p : {2, 3, 4}) {
    for (int m : {p, 2 * p}) {
      const Schedule window = generated("pipemare", p, m);
      const std::vector<int> delays = update_delays(window);
      const Schedule flat = unroll(window, 3);
      for (const auto& actions : flat.actions) {
        for (size_t f = 0; f < actions.size(); ++f) {
          const Action& a = actions[f];
          if (a.kind != ActionKind::F || a.microbatch < m || a.microbatch >= 2 * m) continue;
          const auto b = std::find(actions.begin(), actions.end(),
                                   Action{ActionKind::B, a.stage, a.microbatch});
          ASSERT_NE(b, actions.end());
          const auto updates = std::count_if(actions.begin() + f, b, [&](const Action& x) {
            return x.kind == ActionKind::B && x.stage == a.stage;
          });
          EXPECT_EQ(updates, delays[a.stage])
              << "p=" << p << " m=" << m << " stage " << a.stage << " micro-batch " << a.microbatch;
        }
      }
    }
  }
}

// Schedules with a flush, where the count is what it would be if each B
// updated: GPipe runs every F before any B, so B(m - 1) follows m - 1 B's;
// 1F1B's steady state is the window's; a split backward (I, W) has no B.
TEST(UpdateDelays, CountTheBackwardsOfFlushedOrdersByHand) {
  EXPECT_EQ(update_delays(generated("gpipe", 3, 5)), (std::vector<int>{4, 4, 4}));
  EXPECT_EQ(update_delays(generated("1f1b", 4, 8)), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(update_delays(generated("zb-h1", 2, 4)), (std::vector<int>{0, 0}));
}

}  // namespace
}  // namespace baton::schedule
