// zb-h1, zb-h2 and zb-v against the formulas of Qi et al. 2024 ("Zero Bubble
// Pipeline Parallelism"), measured with the simulator. Costs are per rank:
// tf forward, tb the full backward, tw its weight part, so I = tb - tw, W = tw.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/simulator.h"

namespace baton::schedule {
namespace {

using ::testing::HasSubstr;

Schedule make(const std::string& name, int p, int m, int v = 0) {
  return generate(name, GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v));
}

sim::Stats simulate(const Schedule& s, double tf, double tb, double tw, bool count_stash = false) {
  sim::CostModel costs = sim::uniform_cost_model(s, tf, tb, tw);
  // Counting the weight stash makes peak_activation_bytes hold a chunk until its W.
  if (count_stash)
    for (auto& stage : costs.stages) stage.weight_stash_bytes = stage.activation_bytes;
  return sim::simulate(lower(s), costs).stats;
}

std::string error_of(const std::string& name, int p, int m, int v = 0) {
  try {
    make(name, p, m, v);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// --- validity over the whole supported range --------------------------------

class ZeroBubbleRanks : public ::testing::TestWithParam<int> {};

TEST_P(ZeroBubbleRanks, EveryMicrobatchCountGivesAValidCompleteSchedule) {
  const int p = GetParam();
  for (int m = 1; m <= 64; ++m) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
    const Schedule h1 = make("zb-h1", p, m);  // generate() validates
    EXPECT_EQ(h1.action_count(), static_cast<size_t>(3 * p * m));
    EXPECT_NO_THROW(lower(h1));
    const Schedule v = make("zb-v", p, m);
    EXPECT_EQ(v.stages, 2 * p);
    EXPECT_EQ(v.map, StageMap::V);
    EXPECT_EQ(v.action_count(), static_cast<size_t>(6 * p * m));
    EXPECT_NO_THROW(lower(v));
    if (m >= 2 * p) {
      EXPECT_NO_THROW(lower(make("zb-h2", p, m)));
    } else {
      EXPECT_THAT(error_of("zb-h2", p, m), HasSubstr("needs m >= 2p"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(P1To16, ZeroBubbleRanks, ::testing::Range(1, 17));

// The greedy list scheduler behind zb-h1, zb-h2 and chimera scanned every
// cell of a rank at each time unit: quadratic in m (zb-h1 at p = 64, m = 8192
// took 33 s, p = 4, m = 10^6 hours). Now each time unit costs O(log n); a
// quadratic scan would take hours here and meet CTest's timeout (no timing
// threshold in the test itself: the machine's load would make it flaky).
TEST(ZeroBubbleGreedy, GeneratesManyMicrobatchesInNearLinearTime) {
  for (const char* name : {"zb-h1", "zb-h2", "chimera"}) {
    const Schedule s = generate(name, GeneratorOptions().set_ranks(8).set_microbatches(20000));
    EXPECT_EQ(s.action_count(), (std::string(name) == "chimera" ? 2u : 3u) * 8 * 20000) << name;
  }
}

TEST(ZeroBubbleOptions, ErrorsNameTheRuleAndTheValues) {
  EXPECT_THAT(error_of("zb-h2", 2, 3), HasSubstr("[schedule.zb-h2] needs m >= 2p"));
  EXPECT_THAT(error_of("zb-h2", 2, 3), HasSubstr("got m=3, p=2"));
  EXPECT_THAT(error_of("zb-h1", 4, 8, 2), HasSubstr("--virtual 2 is not defined for zb-h1"));
  EXPECT_THAT(error_of("zb-h2", 4, 8, 2), HasSubstr("--virtual 2 is not defined for zb-h2"));
  EXPECT_THAT(error_of("zb-v", 4, 8, 3), HasSubstr("--virtual 3 is not defined for zb-v"));
  EXPECT_EQ(error_of("zb-v", 4, 8, 2), "");
  EXPECT_EQ(make("zb-v", 4, 8, 2).stages, 8);
}

// --- formulas, swept over p, m and costs --------------------------------------

struct Costs {
  double tf, tb, tw;
  double f() const { return tf; }
  double i() const { return tb - tw; }
  double w() const { return tw; }
};

// W <= I in all of these: the paper's formulas assume a W no longer than I.
const Costs kCosts[] = {{1, 2, 1}, {1, 3, 1}, {2, 3, 1}, {1, 2, 0.5}, {2, 4, 1}, {1.5, 2, 1}};

class ZeroBubbleSweep : public ::testing::TestWithParam<std::tuple<int, int, int>> {
 protected:
  int p() const { return std::get<0>(GetParam()); }
  // m as a multiple of p, plus an odd remainder to leave the steady state uneven.
  int m(int at_least) const {
    return std::max(at_least, std::get<1>(GetParam()) * p()) + std::get<2>(GetParam());
  }
};

// The paper's ZB-H1 bubble is the step time beyond one rank's work: rank 0
// starts at 0 and ends last, so makespan - m(F + I + W). (Per-rank idle within
// the span differs by rank: the last rank starts (p - 1)F late and ends early.)
TEST_P(ZeroBubbleSweep, ZbH1StepExceedsTheWorkByTheFormula) {
  const int p = this->p(), m = this->m(p);
  for (const Costs& c : kCosts) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                 " F=" + std::to_string(c.f()) + " I=" + std::to_string(c.i()) +
                 " W=" + std::to_string(c.w()));
    const sim::Stats zb = simulate(make("zb-h1", p, m), c.tf, c.tb, c.tw);
    const double work = m * (c.f() + c.i() + c.w());
    EXPECT_DOUBLE_EQ(zb.makespan - work, (p - 1) * (c.f() + c.i() - c.w()));
    const sim::Stats base = simulate(make("1f1b", p, m), c.tf, c.tb, c.tw);
    EXPECT_DOUBLE_EQ(base.makespan - work, (p - 1) * (c.f() + c.i() + c.w()));
  }
}

TEST_P(ZeroBubbleSweep, ZbH1KeepsOneFOneBsInflightMicrobatches) {
  const int p = this->p(), m = this->m(p);
  const sim::Stats zb = simulate(make("zb-h1", p, m), 1, 2, 1);
  const sim::Stats base = simulate(make("1f1b", p, m), 1, 2, 1);
  EXPECT_EQ(zb.peak_inflight[0], p);
  for (int r = 0; r < p; ++r) {
    EXPECT_LE(zb.peak_inflight[r], p - r) << "rank " << r;
    EXPECT_LE(zb.peak_activation_bytes[r], base.peak_activation_bytes[0]) << "rank " << r;
  }
  // Until their W: at most 2p - 1 - r micro-batches.
  const sim::Stats stash = simulate(make("zb-h1", p, m), 1, 2, 1, true);
  for (int r = 0; r < p; ++r)
    EXPECT_LE(stash.peak_activation_bytes[r], 2 * p - 1 - r) << "rank " << r;
}

// ZB-H2 is a parallelogram: ranks start F apart and end apart, and rank 0,
// the one waiting longest for its first I, is idle within its own span for
// (p - 1)(F + I - 2W); no rank idles more. (With F + I = 2W, as for equal
// costs, that is zero on every rank.)
TEST_P(ZeroBubbleSweep, ZbH2IdlesWithinEachRanksSpanByTheFormula) {
  const int p = this->p(), m = this->m(2 * p);
  for (const Costs& c : kCosts) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) +
                 " F=" + std::to_string(c.f()) + " I=" + std::to_string(c.i()) +
                 " W=" + std::to_string(c.w()));
    const double formula = (p - 1) * (c.f() + c.i() - 2 * c.w());
    const sim::Stats zb = simulate(make("zb-h2", p, m), c.tf, c.tb, c.tw);
    EXPECT_NEAR(zb.idle_within_span[0], formula, 1e-9);
    for (int r = 0; r < p; ++r) {
      EXPECT_LE(zb.idle_within_span[r], formula + 1e-9) << "rank " << r;
      if (c.f() + c.i() == 2 * c.w()) {
        EXPECT_NEAR(zb.idle_within_span[r], 0, 1e-9) << "rank " << r;
      }
    }
  }
}

TEST_P(ZeroBubbleSweep, ZbH2HoldsAtMostTwicePMinusRMinusOneInflight) {
  const int p = this->p(), m = this->m(2 * p);
  const sim::Stats zb = simulate(make("zb-h2", p, m), 1, 2, 1);
  EXPECT_EQ(zb.peak_inflight[0], 2 * p - 1);
  for (int r = 0; r < p; ++r) EXPECT_LE(zb.peak_inflight[r], 2 * (p - r) - 1) << "rank " << r;
  const sim::Stats stash = simulate(make("zb-h2", p, m), 1, 2, 1, true);
  for (int r = 0; r < p; ++r) EXPECT_LE(stash.peak_activation_bytes[r], 2 * p - 1) << "rank " << r;
}

// ZB-V with equal chunk costs: no rank idles within its span, the step ends
// (p - 1) chunk forwards after m(F + I + W), and each rank holds at most 2p
// half-size chunks, 1F1B's peak activation memory.
TEST_P(ZeroBubbleSweep, ZbVHasNoBubbleAndOneFOneBsMemoryWithEqualCosts) {
  const int p = this->p(), m = this->m(2 * p - 1);
  const double tf = 1, tb = 2, tw = 1;  // per chunk: F = I = W = 1/2
  const sim::Stats zb = simulate(make("zb-v", p, m), tf, tb, tw);
  const sim::Stats base = simulate(make("1f1b", p, m), tf, tb, tw);
  EXPECT_DOUBLE_EQ(zb.makespan, m * 3.0 + (p - 1) * tf / 2);
  for (int r = 0; r < p; ++r) {
    EXPECT_DOUBLE_EQ(zb.idle_within_span[r], 0) << "rank " << r;
    EXPECT_LE(zb.peak_inflight[r], 2 * p) << "rank " << r;
    EXPECT_LE(zb.peak_activation_bytes[r], base.peak_activation_bytes[0] + 1e-9) << "rank " << r;
  }
  EXPECT_EQ(zb.peak_inflight[0], 2 * p);
  // W follows its I in the steady state, so the stash adds nothing to the peak.
  const sim::Stats stash = simulate(make("zb-v", p, m), tf, tb, tw, true);
  for (int r = 0; r < p; ++r)
    EXPECT_LE(stash.peak_activation_bytes[r], base.peak_activation_bytes[0] + 1e-9) << "rank " << r;
  if (p > 1) {
    EXPECT_LT(zb.makespan, simulate(make("zb-h1", p, m), tf, tb, tw).makespan);
    EXPECT_LT(zb.makespan, base.makespan);
  }
}

// With unequal costs ZB-V keeps a bubble, but only in warm-up and cool-down:
// it does not grow with m.
TEST_P(ZeroBubbleSweep, ZbVBubbleDoesNotGrowWithMicrobatchesForAnyCosts) {
  const int p = this->p(), m = this->m(2 * p);
  for (const Costs& c : kCosts) {
    const sim::Stats a = simulate(make("zb-v", p, m), c.tf, c.tb, c.tw);
    const sim::Stats b = simulate(make("zb-v", p, m + 2 * p), c.tf, c.tb, c.tw);
    for (int r = 0; r < p; ++r) EXPECT_NEAR(a.idle_within_span[r], b.idle_within_span[r], 1e-9);
    if (p > 1) {
      EXPECT_LT(a.makespan, simulate(make("1f1b", p, m), c.tf, c.tb, c.tw).makespan);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PByMultipleByRemainder, ZeroBubbleSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8, 12, 16),
                                            ::testing::Values(1, 2, 4),
                                            ::testing::Values(0, 1, 3)));

}  // namespace
}  // namespace baton::schedule
