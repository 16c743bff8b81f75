// interleaved-zb, simulated: with F = I = W and no communication it idles
// only while the first forwards cross the pipeline (the zero-bubble bound);
// it holds interleaved 1F1B's activations on every rank (less for m = p);
// and with the same
// costs it is never slower than interleaved 1F1B.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/simulator.h"

namespace baton::sim {
namespace {

using schedule::GeneratorOptions;

Stats run(const std::string& name, int p, int m, int v, double tf, double tb, double tw,
          double comm) {
  const schedule::Schedule s = schedule::lower(schedule::generate(
      name, GeneratorOptions().set_ranks(p).set_microbatches(m).set_virtual_stages(v)));
  return simulate(s, uniform_cost_model(s, tf, tb, tw, comm)).stats;
}

using Shape = std::tuple<int, int, int>;  // p, m, v

class InterleavedZb : public ::testing::TestWithParam<Shape> {};

// The last rank cannot start before p - 1 chunk forwards (tf / v each) have
// run, and then has m (tf + tb) of work; no schedule is shorter. With
// F = I = W per chunk interleaved-zb reaches that bound for m >= p.
TEST_P(InterleavedZb, WithEqualFIWAndNoCommunicationIdlesOnlyWhileTheFirstForwardsCross) {
  const auto [p, m, v] = GetParam();
  const double tf = 1, tb = 2, tw = 1;
  const Stats s = run("interleaved-zb", p, m, v, tf, tb, tw, 0);
  const double bound = (p - 1) * tf / v + m * (tf + tb);
  EXPECT_NEAR(s.makespan, bound, 1e-9 * bound) << "p=" << p << " m=" << m << " v=" << v;
}

// The same warm-up, so the same peak; but for m == p, where interleaved runs
// every forward before its first backward and interleaved-zb does not.
TEST_P(InterleavedZb, HoldsInterleavedOneFOneBsPeakActivationsOnEveryRankAndLessWhenMIsP) {
  const auto [p, m, v] = GetParam();
  const Stats zb = run("interleaved-zb", p, m, v, 1, 2, 1, 0);
  const Stats one_f_one_b = run("interleaved", p, m, v, 1, 2, 1, 0);
  if (m != p) {
    EXPECT_EQ(zb.peak_inflight, one_f_one_b.peak_inflight);
  } else {
    for (int r = 0; r < p; ++r) EXPECT_LE(zb.peak_inflight[r], one_f_one_b.peak_inflight[r]);
    EXPECT_LT(zb.peak_inflight[p - 1], one_f_one_b.peak_inflight[p - 1]);
  }
}

TEST_P(InterleavedZb, IsNeverSlowerThanInterleavedOneFOneBUnderTheSameCosts) {
  const auto [p, m, v] = GetParam();
  for (const auto& [tf, tb, tw] : std::vector<std::tuple<double, double, double>>{
           {1, 2, 1}, {1, 3, 1}, {1, 3, 2}, {2, 3, 1}}) {
    for (double comm : {0.0, 0.2, 1.0}) {
      const double zb = run("interleaved-zb", p, m, v, tf, tb, tw, comm).makespan;
      const double one_f_one_b = run("interleaved", p, m, v, tf, tb, tw, comm).makespan;
      EXPECT_LE(zb, one_f_one_b * (1 + 1e-9))
          << "F=" << tf << " B=" << tb << " W=" << tw << " comm=" << comm;
    }
  }
}

// m a multiple of p, and m that PyTorch's rule splits into floor(m / p)
// equal groups (6 and 10 for p = 4, 9 for p = 3).
INSTANTIATE_TEST_SUITE_P(Shapes, InterleavedZb,
                         ::testing::Values(Shape{1, 4, 2}, Shape{2, 2, 2}, Shape{2, 8, 2},
                                           Shape{2, 8, 3}, Shape{3, 9, 2}, Shape{4, 4, 2},
                                           Shape{4, 6, 2}, Shape{4, 8, 2}, Shape{4, 8, 3},
                                           Shape{4, 10, 2}, Shape{4, 12, 4}, Shape{4, 16, 2},
                                           Shape{8, 16, 2}, Shape{8, 24, 3}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return "p" + std::to_string(std::get<0>(info.param)) + "_m" +
                                  std::to_string(std::get<1>(info.param)) + "_v" +
                                  std::to_string(std::get<2>(info.param));
                         });

}  // namespace
}  // namespace baton::sim
