// dualpipev, v-half and v-min: orders against PyTorch, activation memory
// against the formulas of DualPipe's README and of Qi et al. ("Pipeline
// Parallelism with Controllable Memory", NeurIPS 2024), and bubbles against
// zb-v and 1f1b, all measured with the simulator. Costs are per rank (tf
// forward, tb full backward, tw its weight part) and split over the 2 chunks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/text_format.h"
#include "baton/sim/simulator.h"

namespace baton::schedule {
namespace {

using ::testing::HasSubstr;

Schedule make(const std::string& name, int p, int m) {
  return generate(name, GeneratorOptions().set_ranks(p).set_microbatches(m));
}

// With `until_weight`, a chunk's activation counts until its W (the weight
// stash), not just until its I: the stricter of the two memory measures.
sim::Stats simulate(const Schedule& s, double tf, double tb, double tw, bool until_weight = false) {
  sim::CostModel costs = sim::uniform_cost_model(s, tf, tb, tw);
  if (until_weight)
    for (auto& stage : costs.stages) stage.weight_stash_bytes = stage.activation_bytes;
  return sim::simulate(lower(s), costs).stats;
}

std::string error_of(const std::string& name, int p, int m, int v = 0) {
  try {
    generate(name, GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::vector<Action> parse_rank(const std::string& line) {
  return parse_schedule(line).actions.at(0);
}

// The most activation any rank holds, in units of a full stage (2 chunks).
double most(const std::vector<double>& per_rank) {
  return *std::max_element(per_rank.begin(), per_rank.end());
}

// --- dualpipev ----------------------------------------------------------------

// Printed from torch 2.15's ScheduleDualPipeV._calculate_single_rank_operations
// (overlapped pairs flattened forward first).
TEST(DualPipeV, MatchesPyTorchsOrderForTwoAndThreeRanks) {
  const Schedule a = make("dualpipev", 2, 4);
  EXPECT_EQ(a.actions[0], parse_rank("0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 "
                                     "3B3 0I2 0W2 0I3 0W3"));
  EXPECT_EQ(a.actions[1], parse_rank("1F0 2F0 1F1 2F1 1F2 2B0 2F2 1B0 1F3 2B1 2F3 1B1 2B2 1B2 "
                                     "2I3 1I3 2W3 1W3"));
  const Schedule b = make("dualpipev", 3, 7);
  EXPECT_EQ(b.actions[0], parse_rank("0F0 0F1 0F2 0F3 0F4 5F0 5I0 5W0 5F1 5I1 5W1 5F2 0F5 5B2 5F3 "
                                     "0B0 0F6 5B3 5F4 0B1 5B4 5F5 0B2 5B5 5F6 0B3 5B6 0I4 0W4 0I5 "
                                     "0W5 0I6 0W6"));
  EXPECT_EQ(b.actions[1], parse_rank("1F0 1F1 1F2 4F0 1F3 4F1 4I0 4W0 4F2 1F4 4B1 4F3 1B0 1F5 4B2 "
                                     "4F4 1B1 1F6 4B3 4F5 1B2 4B4 4F6 1B3 4B5 1B4 4I6 1I5 4W6 1I6 "
                                     "1W5 1W6"));
  EXPECT_EQ(b.actions[2], parse_rank("2F0 3F0 2F1 3F1 2F2 3F2 2F3 3B0 3F3 2B0 2F4 3B1 3F4 2B1 2F5 "
                                     "3B2 3F5 2B2 2F6 3B3 3F6 2B3 3B4 2B4 3B5 2I5 3I6 2I6 2W5 3W6 "
                                     "2W6"));
}

TEST(DualPipeV, RefusesFewerMicrobatchesThanStagesNamingTheRule) {
  EXPECT_THAT(error_of("dualpipev", 4, 7), HasSubstr("[schedule.dualpipev] needs m >= 2p"));
  EXPECT_THAT(error_of("dualpipev", 4, 7), HasSubstr("got m=7, p=4 (try m=8)"));
  EXPECT_EQ(error_of("dualpipev", 4, 8), "");
  EXPECT_THAT(error_of("dualpipev", 4, 8, 3),
              HasSubstr("--virtual 3 is not defined for dualpipev"));
}

class DualPipeVSweep : public ::testing::TestWithParam<std::tuple<int, int>> {};

// DualPipe's README: DualPipeV holds PP + 1 = 2p + 1 chunks per rank (rank 0
// reaches it when the first forward of its overlapped pairs runs before the
// backward), against 1F1B's p full stages (2p chunks).
TEST_P(DualPipeVSweep, HoldsAtMostTwoPPlusOneChunksAsTheReadmeSays) {
  const auto [p, extra] = GetParam();
  const int m = 2 * p + extra;
  const Schedule s = make("dualpipev", p, m);
  const sim::Stats st = simulate(s, 1, 2, 1);
  EXPECT_EQ(st.peak_inflight[0], 2 * p + 1);
  for (int r = 0; r < p; ++r) EXPECT_LE(st.peak_inflight[r], 2 * p + 1) << "rank " << r;
  const sim::Stats stash = simulate(s, 1, 2, 1, true);
  EXPECT_LE(most(stash.peak_activation_bytes), p + 0.5 + 1e-9);
}

// README bubble, PP = 2p stages: (PP/2 - 1)(F&B + B - 3W) with per-chunk
// costs; baton runs an overlapped pair back to back, so F&B = F + B. No rank
// idles within its span longer than that, and the step is never longer than
// the work plus it.
TEST_P(DualPipeVSweep, BubbleStaysWithinTheReadmeFormula) {
  const auto [p, extra] = GetParam();
  const int m = 2 * p + extra;
  for (const auto& [tf, tb, tw] : {std::tuple{1.0, 2.0, 1.0},
                                   {1.0, 3.0, 1.0},
                                   {2.0, 3.0, 1.0},
                                   {1.0, 2.0, 0.5},
                                   {2.0, 4.0, 1.0}}) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m) + " tf=" +
                 std::to_string(tf) + " tb=" + std::to_string(tb) + " tw=" + std::to_string(tw));
    const double f = tf / 2, b = tb / 2, w = tw / 2;  // per chunk
    const double formula = (p - 1) * ((f + b) + b - 3 * w);
    const sim::Stats st = simulate(make("dualpipev", p, m), tf, tb, tw);
    EXPECT_LE(st.makespan - m * (tf + tb), formula + 1e-9);
    for (int r = 0; r < p; ++r) EXPECT_LE(st.idle_within_span[r], formula + 1e-9) << "rank " << r;
    if (p > 1) {
      EXPECT_LT(st.makespan, simulate(make("1f1b", p, m), tf, tb, tw).makespan);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(PByExtraMicrobatches, DualPipeVSweep,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 5, 8, 12, 16),
                                            ::testing::Values(0, 1, 5, 16)));

// --- v-half and v-min ---------------------------------------------------------

TEST(VShape, PeakFormulasAreThePapersTableInChunks) {
  // (p + 2) / 2 and (p + 4) / 3 micro-batches of a full stage = 2 chunks each.
  EXPECT_EQ(v_half_peak_chunks(4), 6);
  EXPECT_EQ(v_half_peak_chunks(5), 7);
  EXPECT_EQ(v_min_peak_chunks(4), 4);
  EXPECT_EQ(v_min_peak_chunks(8), 8);
  EXPECT_EQ(v_min_peak_chunks(16), 12);
}

class VShapeSweep : public ::testing::TestWithParam<int> {};

TEST_P(VShapeSweep, EveryMicrobatchCountGivesAValidScheduleOnTheVMap) {
  const int p = GetParam();
  for (const char* name : {"v-half", "v-min"}) {
    for (int m = 1; m <= 40; ++m) {
      SCOPED_TRACE(std::string(name) + " p=" + std::to_string(p) + " m=" + std::to_string(m));
      const Schedule s = make(name, p, m);  // generate() validates
      EXPECT_EQ(s.stages, 2 * p);
      EXPECT_EQ(s.map, StageMap::V);
      EXPECT_EQ(s.action_count(), static_cast<size_t>(6 * p * m));
      EXPECT_NO_THROW(lower(s));
    }
  }
}

// Memory counted from F until W (so also until I), per rank, against the
// paper's (p + 2) / 2 and (p + 4) / 3 full stages; 1F1B holds p.
TEST_P(VShapeSweep, PeakActivationMemoryStaysWithinThePapersBound) {
  const int p = GetParam();
  for (int m : {1, p, 2 * p, 4 * p + 1, 8 * p + 3}) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
    const sim::Stats half = simulate(make("v-half", p, m), 1, 2, 1, true);
    const sim::Stats min = simulate(make("v-min", p, m), 1, 2, 1, true);
    EXPECT_LE(most(half.peak_activation_bytes), (p + 2) / 2.0 + 1e-9);
    EXPECT_LE(most(min.peak_activation_bytes), (p + 4) / 3 + 1e-9);
    for (int r = 0; r < p; ++r) {
      EXPECT_LE(half.peak_inflight[r], v_half_peak_chunks(p)) << "rank " << r;
      EXPECT_LE(min.peak_inflight[r], v_min_peak_chunks(p)) << "rank " << r;
    }
    if (p >= 6 && m >= 2 * p) {
      const double one_f_one_b = most(simulate(make("1f1b", p, m), 1, 2, 1).peak_activation_bytes);
      EXPECT_DOUBLE_EQ(one_f_one_b, p);
      EXPECT_LT(most(min.peak_activation_bytes), most(half.peak_activation_bytes) + 1e-9);
      EXPECT_LE(most(half.peak_activation_bytes), 0.7 * one_f_one_b);
      EXPECT_LE(most(min.peak_activation_bytes), 0.5 * one_f_one_b);
    }
  }
}

// With F = I = W per chunk (the paper's analysis), the step exceeds the work
// by about 1/2 (v-half) and 2/3 (v-min) of 1F1B's bubble: more than zb-v's,
// less than 1F1B's, and it does not grow with m.
TEST_P(VShapeSweep, BubbleLiesBetweenZbVsAndOneFOneBsWithEqualCosts) {
  const int p = GetParam();
  const double tf = 1, tb = 2, tw = 1;
  if (p == 1) {  // one rank runs its work back to back: no bubble anywhere
    for (const char* name : {"zb-v", "v-half", "v-min", "1f1b"}) {
      EXPECT_DOUBLE_EQ(simulate(make(name, 1, 5), tf, tb, tw).makespan, 5 * (tf + tb)) << name;
    }
    return;
  }
  for (int m : {4 * p, 8 * p + 1}) {
    SCOPED_TRACE("p=" + std::to_string(p) + " m=" + std::to_string(m));
    const double work = m * (tf + tb);
    auto bubble = [&](const char* name) {
      return simulate(make(name, p, m), tf, tb, tw).makespan - work;
    };
    const double zb = bubble("zb-v"), half = bubble("v-half"), min = bubble("v-min");
    const double base = bubble("1f1b");
    EXPECT_LT(zb, half);
    EXPECT_LE(half, min);
    EXPECT_LE(half, 0.6 * base);
    EXPECT_LE(min, 0.7 * base);
  }
  const double work4 = 4 * p * (tf + tb), work8 = 8 * p * (tf + tb);
  for (const char* name : {"v-half", "v-min"}) {
    const double a = simulate(make(name, p, 4 * p), tf, tb, tw).makespan - work4;
    const double b = simulate(make(name, p, 8 * p), tf, tb, tw).makespan - work8;
    EXPECT_LE(b, a + 1e-9) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(P1To16, VShapeSweep, ::testing::Range(1, 17));

TEST(VShape, RefusesOtherChunkCountsNamingTheSchedule) {
  EXPECT_THAT(error_of("v-half", 4, 8, 3),
              HasSubstr("[schedule.v-half] --virtual 3 is not defined"));
  EXPECT_THAT(error_of("v-min", 4, 8, 1), HasSubstr("[schedule.v-min] --virtual 1 is not defined"));
  EXPECT_EQ(error_of("v-min", 4, 8, 2), "");
}

}  // namespace
}  // namespace baton::schedule
