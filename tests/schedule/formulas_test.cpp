// Simulated schedules against the closed forms from the papers: bubble
// fractions (GPipe, 1F1B, naive, interleaved), activations in flight, and the
// cost of communication latency.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/cost_model.h"
#include "baton/sim/simulator.h"

namespace baton::schedule {
namespace {

constexpr double kTolerance = 1e-9;

sim::Stats simulate(const Schedule& s, double tf, double tb, double comm = 0) {
  return sim::simulate(s, sim::uniform_cost_model(s, tf, tb, /*tw=*/0, comm)).stats;
}

Schedule make(const std::string& name, int p, int m, int v = 0) {
  return generate(name, GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v));
}

// (tf, tb): a backward as long as a forward, twice as long, and 1.5x.
const std::vector<std::pair<double, double>> kTimes = {{1, 1}, {1, 2}, {2, 3}};

using Shape = std::tuple<int, int>;  // p, m

class FillDrain : public ::testing::TestWithParam<Shape> {};

TEST_P(FillDrain, GpipeAndOneFOneBBubbleIsRanksMinusOneOverMicrobatchesPlusRanksMinusOne) {
  const auto [p, m] = GetParam();
  const double expected = static_cast<double>(p - 1) / (m + p - 1);
  for (const auto& [tf, tb] : kTimes) {
    for (const char* name : {"gpipe", "1f1b"}) {
      const sim::Stats stats = simulate(make(name, p, m), tf, tb);
      EXPECT_NEAR(stats.bubble_fraction, expected, kTolerance)
          << name << " p=" << p << " m=" << m << " tf=" << tf << " tb=" << tb;
      EXPECT_NEAR(stats.makespan, (m + p - 1) * (tf + tb), kTolerance) << name;
    }
  }
}

TEST_P(FillDrain, NaiveBubbleIsRanksMinusOneOverRanks) {
  const auto [p, m] = GetParam();
  for (const auto& [tf, tb] : kTimes) {
    const sim::Stats stats = simulate(make("naive", p, m), tf, tb);
    EXPECT_NEAR(stats.bubble_fraction, static_cast<double>(p - 1) / p, kTolerance)
        << "p=" << p << " m=" << m;
  }
}

TEST_P(FillDrain, GpipeHoldsEveryMicrobatchInFlightOnEveryRank) {
  const auto [p, m] = GetParam();
  const sim::Stats stats = simulate(make("gpipe", p, m), 1, 2);
  for (int r = 0; r < p; ++r) EXPECT_EQ(stats.peak_inflight[r], m) << "rank " << r;
}

TEST_P(FillDrain, OneFOneBHoldsRanksMinusRankMicrobatchesInFlightOnRank) {
  const auto [p, m] = GetParam();
  const sim::Stats stats = simulate(make("1f1b", p, m), 1, 2);
  for (int r = 0; r < p; ++r) EXPECT_EQ(stats.peak_inflight[r], std::min(p - r, m)) << "rank " << r;
}

// GPipe with latency C between ranks: micro-batch 0's forward reaches the last
// rank at (p - 1)(tf + C); forwards then arrive every tf, as fast as the last
// rank consumes them, so it computes m(tf + tb) without a gap; the last
// backward then walks back through p - 1 ranks at tb + C each (every rank is
// idle by then). Total (m + p - 1)(tf + tb) + 2(p - 1)C, for any m and C.
TEST_P(FillDrain, GpipeLatencyAddsTwoCrossingsPerRankBoundary) {
  const auto [p, m] = GetParam();
  for (const double comm : {0.25, 1.0, 7.0}) {
    const Schedule s = make("gpipe", p, m);
    EXPECT_NEAR(simulate(s, 1, 2, comm).makespan - simulate(s, 1, 2).makespan, 2 * (p - 1) * comm,
                kTolerance)
        << "p=" << p << " m=" << m << " C=" << comm;
  }
}

// The simulator charges latency the same way whether the schedule carries
// explicit SEND/RECV or not.
TEST_P(FillDrain, LoweringDoesNotChangeTheSimulatedMakespan) {
  const auto [p, m] = GetParam();
  for (const char* name : {"gpipe", "1f1b", "naive"}) {
    const Schedule s = make(name, p, m);
    EXPECT_NEAR(simulate(lower(s), 1, 2, 0.5).makespan, simulate(s, 1, 2, 0.5).makespan, kTolerance)
        << name << " p=" << p << " m=" << m;
  }
}

INSTANTIATE_TEST_SUITE_P(RanksByMicrobatches, FillDrain,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 8),
                                            ::testing::Values(1, 2, 3, 4, 7, 8, 16)));

// 1F1B with latency C. Micro-batches 0 and 1 fill and drain like GPipe:
// + 2(p - 1)C. From the third on, rank r's backward of micro-batch k waits for
// a round trip through rank r + 1 that its own 1F1B slack does not cover: at
// p = 2, rank 0 has one forward of slack, so every second backward on rank 0
// stalls 2C: + 2 ceil(m / 2) C.
TEST(OneFOneBLatency, FirstTwoMicrobatchesAddTwoCrossingsPerRankBoundary) {
  for (int p = 2; p <= 8; ++p)
    for (int m = 1; m <= 2; ++m)
      for (const double comm : {0.25, 3.0}) {
        const Schedule s = make("1f1b", p, m);
        EXPECT_NEAR(simulate(s, 1, 2, comm).makespan - simulate(s, 1, 2).makespan,
                    2 * (p - 1) * comm, kTolerance)
            << "p=" << p << " m=" << m << " C=" << comm;
      }
}

TEST(OneFOneBLatency, TwoRanksStallTwoCrossingsEverySecondMicrobatch) {
  for (int m = 1; m <= 16; ++m)
    for (const auto& [tf, tb] : kTimes)
      for (const double comm : {0.25, 3.0}) {
        const Schedule s = make("1f1b", 2, m);
        EXPECT_NEAR(simulate(s, tf, tb, comm).makespan - simulate(s, tf, tb).makespan,
                    2 * ((m + 1) / 2) * comm, kTolerance)
            << "m=" << m << " tf=" << tf << " tb=" << tb << " C=" << comm;
      }
}

TEST(OneFOneBLatency, SteadyStateExposesMoreLatencyThanGpipe) {
  for (int p = 2; p <= 6; ++p)
    for (int m = 3; m <= 12; ++m) {
      const double comm = 0.5;
      const Schedule s = make("1f1b", p, m);
      EXPECT_GT(simulate(s, 1, 2, comm).makespan - simulate(s, 1, 2).makespan,
                2 * (p - 1) * comm + kTolerance)
          << "p=" << p << " m=" << m;
    }
}

using InterleavedShape = std::tuple<int, int, int>;  // p, m / p, v

class Interleaved : public ::testing::TestWithParam<InterleavedShape> {};

// Narayanan et al. 2021: the bubble is (p - 1)(tf + tb) / v, that is
// (1 / v)(p - 1) / m of the ideal compute m(tf + tb).
TEST_P(Interleaved, BubbleIsOneOverChunksOfOneFOneBs) {
  const auto [p, groups, v] = GetParam();
  const int m = p * groups;
  for (const auto& [tf, tb] : kTimes) {
    const sim::Stats stats = simulate(make("interleaved", p, m, v), tf, tb);
    const double ideal = m * (tf + tb);
    EXPECT_NEAR((stats.makespan - ideal) / ideal, (p - 1.0) / (v * m), kTolerance)
        << "p=" << p << " m=" << m << " v=" << v << " tf=" << tf << " tb=" << tb;
  }
}

// Rank 0 warms up with 2(p - 1) + (v - 1)p chunk forwards of 1/v of the
// activations each, then one more: p + (p - 1)/v micro-batches' worth
// (Korthikanti et al. 2022: interleaving costs a factor 1 + (p - 1)/(pv)).
// With m == p (one group) the warm-up holds every forward, m v chunks.
TEST_P(Interleaved, RankZeroHoldsRanksPlusRanksMinusOneOverChunksActivations) {
  const auto [p, groups, v] = GetParam();
  const sim::Stats stats = simulate(make("interleaved", p, p * groups, v), 1, 2);
  const double expected = groups < 2 ? static_cast<double>(p) : p + (p - 1.0) / v;
  EXPECT_NEAR(stats.peak_activation_bytes[0], expected, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(RanksGroupsChunks, Interleaved,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8),
                                            ::testing::Values(1, 2, 4),
                                            ::testing::Values(2, 3, 4)));

}  // namespace
}  // namespace baton::schedule
