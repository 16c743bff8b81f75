// zb-auto against the simulator and the Zero Bubble paper's bounds: its own
// timing of the order it picks equals the simulated step, it keeps its memory limit, it
// reaches the paper's ZB-H1 step at 1F1B's memory, and it never loses to the
// handcrafted schedules it searches around.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/cost_model.h"
#include "baton/sim/simulator.h"

namespace baton::schedule {
namespace {

struct Costs {
  double f, i, w, comm;
};

GeneratorOptions options(int p, int m, const Costs& c, int limit = 0) {
  return GeneratorOptions{}.set_ranks(p).set_microbatches(m).set_zb_auto(
      {c.f, c.i, c.w, c.comm, limit});
}

// The simulator's view of any schedule under the same costs (per rank, v = 1).
sim::Stats simulate(const std::string& name, const GeneratorOptions& o, const Costs& c) {
  const Schedule s = lower(generate(name, o));
  return sim::simulate(s, sim::uniform_cost_model(s, c.f, c.i + c.w, c.w, c.comm)).stats;
}

TEST(ZbAuto, WithEqualCostsAtOneFOneBsMemoryItReachesTheZbH1Step) {
  // The paper: ZB-H1 exceeds the work m(F + I + W) by (p - 1)(F + I - W),
  // and nothing beats (p - 1) F of warm-up + the last rank's work m(F + I + W).
  for (int p : {2, 3, 4, 6}) {
    const int m = 3 * p;
    const Costs c{1, 1, 1, 0};
    const double want = m * 3.0 + (p - 1) * (c.f + c.i - c.w);
    EXPECT_DOUBLE_EQ(simulate("zb-auto", options(p, m, c), c).makespan, want) << "p=" << p;
    EXPECT_DOUBLE_EQ(simulate("zb-h1", options(p, m, c), c).makespan, want) << "p=" << p;
  }
}

class ZbAutoCosts : public testing::TestWithParam<Costs> {};

TEST_P(ZbAutoCosts, ItsPredictionIsTheSimulatedStepExactly) {
  const Costs c = GetParam();
  for (int p : {2, 4, 5}) {
    for (int m : {p, 2 * p + 1, 4 * p}) {
      for (int limit : {1, p, 2 * p - 1}) {
        const GeneratorOptions o = options(p, m, c, limit);
        const sim::Stats st = simulate("zb-auto", o, c);
        const double predicted = zb_auto_predicted_step(o);
        EXPECT_NEAR(st.makespan, predicted, 1e-9 * predicted)
            << "p=" << p << " m=" << m << " limit=" << limit;
        for (int r = 0; r < p; ++r) {
          EXPECT_LE(st.peak_inflight[r], std::min(limit, m))
              << "rank " << r << " p=" << p << " m=" << m;
        }
      }
    }
  }
}

TEST_P(ZbAutoCosts, NeverSlowerThanOneFOneBOrZbH1AtTheirMemory) {
  const Costs c = GetParam();
  for (int p : {2, 3, 4, 8}) {
    for (int m : {p, 2 * p, 3 * p + 1}) {
      const double autos = simulate("zb-auto", options(p, m, c, p), c).makespan;
      EXPECT_LE(autos, simulate("1f1b", options(p, m, c), c).makespan + 1e-9)
          << "p=" << p << " m=" << m;
      EXPECT_LE(autos, simulate("zb-h1", options(p, m, c), c).makespan + 1e-9)
          << "p=" << p << " m=" << m;
    }
  }
}

TEST_P(ZbAutoCosts, MoreMemoryNeverMakesTheStepLonger) {
  const Costs c = GetParam();
  const int p = 4, m = 12;
  double previous = std::numeric_limits<double>::infinity();
  for (int limit = 1; limit <= 2 * p; ++limit) {
    const double t = simulate("zb-auto", options(p, m, c, limit), c).makespan;
    EXPECT_LE(t, previous + 1e-9) << "limit " << limit;
    previous = t;
  }
  // With 2p - 1 it has ZB-H2's memory and is no slower than ZB-H2.
  EXPECT_LE(simulate("zb-auto", options(p, m, c, 2 * p - 1), c).makespan,
            simulate("zb-h2", options(p, m, c), c).makespan + 1e-9);
}

INSTANTIATE_TEST_SUITE_P(CostMixes, ZbAutoCosts,
                         testing::Values(Costs{1, 1, 1, 0}, Costs{1, 2, 1, 0}, Costs{1, 1, 1, 0.5},
                                         Costs{2, 3, 1, 0.25}, Costs{1, 1, 0.2, 1}),
                         [](const testing::TestParamInfo<Costs>& info) {
                           return "mix" + std::to_string(info.index);
                         });

TEST(ZbAuto, RefusesBadCostsAndLimitsNamingThem) {
  auto error_of = [](const GeneratorOptions& o) {
    try {
      generate("zb-auto", o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(options(2, 4, {0, 1, 1, 0})).find("F > 0"), std::string::npos);
  EXPECT_NE(error_of(options(2, 4, {1, std::nan(""), 1, 0})).find("costs must be finite"),
            std::string::npos);
  EXPECT_NE(error_of(options(2, 4, {1, 1, 1, 0}, -1)).find("memory limit must be >= 1"),
            std::string::npos);
}

}  // namespace
}  // namespace baton::schedule
