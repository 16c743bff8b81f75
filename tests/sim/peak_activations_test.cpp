// Peak activation memory per rank, in micro-batches' worth of one stage
// chunk's activations (Stats::peak_inflight: an F adds one, its B, or its I
// when the backward is split, removes it), against the papers' figures for
// uniform stages, swept over p and m. The byte figure must agree with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/simulator.h"

namespace baton::sim {
namespace {

using schedule::GeneratorOptions;

Stats run(const std::string& name, int p, int m, int v = 0) {
  const schedule::Schedule s = schedule::lower(schedule::generate(
      name, GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v)));
  return simulate(s, uniform_cost_model(s, 1, 2, 1)).stats;
}

// p, and m as a multiple of p plus an offset.
class PeakActivations : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  int p() const { return std::get<0>(GetParam()); }
  int m(int factor) const { return factor * p() + std::get<1>(GetParam()); }
};

// The byte figure counts the same micro-batches: 1 byte per chunk forward,
// and a rank of v chunks holds 1 / v of its share per chunk.
void expect_bytes_match(const Stats& s, int v) {
  for (size_t r = 0; r < s.peak_inflight.size(); ++r)
    EXPECT_DOUBLE_EQ(s.peak_activation_bytes[r], static_cast<double>(s.peak_inflight[r]) / v)
        << "rank " << r;
}

// 1F1B (PipeDream-Flush): rank r holds p - r forwards before its first B.
TEST_P(PeakActivations, OneFOneBHoldsPMinusROnRankR) {
  for (int factor : {1, 2, 3}) {
    const int m = this->m(factor);
    const Stats s = run("1f1b", p(), m);
    for (int r = 0; r < p(); ++r)
      EXPECT_EQ(s.peak_inflight[r], std::min(p() - r, m)) << "rank " << r;
    expect_bytes_match(s, 1);
  }
}

TEST_P(PeakActivations, GpipeHoldsEveryMicrobatch) {
  const Stats s = run("gpipe", p(), m(2));
  for (int r = 0; r < p(); ++r) EXPECT_EQ(s.peak_inflight[r], m(2)) << "rank " << r;
}

// Zero Bubble (Qi et al. 2024), table of section 3: ZB-H1 keeps 1F1B's peak,
// p micro-batches (on rank 0; p - r on rank r); ZB-H2 needs 2p - 1 (rank 0;
// 2(p - r) - 1 on rank r). I frees a micro-batch's activations; what W still
// needs is the weight stash, counted in bytes only.
TEST_P(PeakActivations, ZbH1HoldsPOnRankZeroAndPMinusROnRankR) {
  for (int factor : {1, 2, 3}) {
    const Stats s = run("zb-h1", p(), m(factor));
    EXPECT_EQ(s.peak_inflight[0], p());
    for (int r = 0; r < p(); ++r) EXPECT_EQ(s.peak_inflight[r], p() - r) << "rank " << r;
    expect_bytes_match(s, 1);
  }
}

TEST_P(PeakActivations, ZbH2HoldsTwicePMinusOneOnRankZero) {
  for (int factor : {2, 3}) {
    const Stats s = run("zb-h2", p(), m(factor));
    EXPECT_EQ(s.peak_inflight[0], 2 * p() - 1);
    for (int r = 0; r < p(); ++r) EXPECT_EQ(s.peak_inflight[r], 2 * (p() - r) - 1) << "rank " << r;
    expect_bytes_match(s, 1);
  }
}

// ZB-V (section 6): p micro-batches of a rank's whole share, 1F1B's peak, but
// on every rank: 2p half-size chunks, once m >= 2p.
TEST_P(PeakActivations, ZbVHoldsTwoPHalfChunksOnEveryRank) {
  for (int factor : {2, 3}) {
    const Stats s = run("zb-v", p(), m(factor));
    for (int r = 0; r < p(); ++r) EXPECT_EQ(s.peak_inflight[r], 2 * p()) << "rank " << r;
    expect_bytes_match(s, 2);
  }
}

// Interleaved 1F1B (Narayanan et al. 2021; Megatron-LM's warm-up): rank r
// runs (p - r - 1) * 2 + (v - 1) * g chunk forwards before its first B, with
// g = p micro-batches per group, and one more in the first steady pair, so it
// holds (p - r - 1) * 2 + (v - 1) * g + 1 chunks of 1 / v of its share: on
// rank 0, (1 + 1/v) p - 1/v micro-batches of the whole share, about p / v more
// than 1F1B. With m == p every forward runs first: v * m chunks. (m not a
// multiple of p: PyTorch's groups of g = m / (m // p), e.g. 5 for p = 4, m = 10.)
TEST(PeakActivationsInterleaved, HoldsMegatronsWarmupPlusOneChunks) {
  for (int p : {2, 3, 4, 5, 8})
    for (int v : {2, 3}) {
      std::vector<int> microbatches = {2 * p, 3 * p};
      if (p == 4) microbatches.push_back(10);
      for (int m : microbatches) {
        const int g = m / (m / p);
        const Stats s = run("interleaved", p, m, v);
        for (int r = 0; r < p; ++r)
          EXPECT_EQ(s.peak_inflight[r], std::min(v * m, (p - r - 1) * 2 + (v - 1) * g + 1))
              << "p=" << p << " m=" << m << " v=" << v << " rank " << r;
        expect_bytes_match(s, v);
      }
      const Stats all = run("interleaved", p, p, v);
      for (int r = 0; r < p; ++r) EXPECT_EQ(all.peak_inflight[r], v * p) << "rank " << r;
    }
}

TEST_P(PeakActivations, LoopedBfsHoldsEveryChunkForward) {
  const Stats s = run("looped-bfs", p(), m(2), 2);
  for (int r = 0; r < p(); ++r) EXPECT_EQ(s.peak_inflight[r], 2 * m(2)) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(RanksAndMicrobatches, PeakActivations,
                         ::testing::Combine(::testing::Values(2, 3, 4, 5, 8),
                                            ::testing::Values(0, 1)),
                         [](const auto& info) {
                           return "p" + std::to_string(std::get<0>(info.param)) + "_m_plus_" +
                                  std::to_string(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace baton::sim
