// The planner's pruning against a brute-force search: on clusters of up to 64
// GPUs, every candidate simulated (no memory limit, no stop) and ranked here
// gives the same first plans as the pruned search, and each candidate's
// bounds (costs.h estimate()) lie at or below what the simulator finds.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "baton/plan/search.h"

namespace baton::plan {
namespace {

struct Case {
  std::string name;
  ModelShape shape;
  int gpus;
  int gpus_per_node;
  double memory_gb;
  int batch;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.name;
}

// Small GPTs whose memory limits bind for some layouts: layer counts that p
// does not always divide, heads that allow several t, a tied variant.
const Case kCases[] = {
    {"l6_on_4_gpus", {6, 1024, 8, 512, 8000, false}, 4, 4, 0.45, 16},
    {"l10_on_8_gpus_tied", {10, 1024, 8, 512, 32000, true}, 8, 8, 0.6, 16},
    {"l12_on_16_gpus", {12, 2048, 16, 512, 16000, false}, 16, 8, 0.9, 32},
    {"l9_on_32_gpus", {9, 2048, 8, 1024, 16000, true}, 32, 8, 0.6, 32},
    {"l16_on_64_gpus", {16, 4096, 32, 512, 32000, false}, 64, 8, 3.0, 64},
    {"l7_on_64_gpus_tied", {7, 2048, 16, 256, 50000, true}, 64, 4, 0.5, 64},
};

class PlanBruteForce : public ::testing::TestWithParam<Case> {};

PlanRequest request_of(const Case& c) {
  PlanRequest r;
  r.shape = c.shape;
  r.cluster.gpus = c.gpus;
  r.cluster.gpus_per_node = c.gpus_per_node;
  r.cluster.memory_gb = c.memory_gb;
  r.cluster.peak_tflops = 100;
  r.batch = c.batch;
  r.top = 5;
  return r;
}

TEST_P(PlanBruteForce, PrunedSearchRanksTheFirstPlansAsSimulatingEveryCandidateDoes) {
  PlanRequest req = request_of(GetParam());
  PlanRequest all = req;
  all.cluster.memory_gb = 1e12;  // no candidate is pruned for memory
  all.top = 1 << 30;             // nor for its step bound
  const PlanResult brute = plan(all);
  if (req.cluster.memory_gb == 0) {
    // The median simulated memory: half the candidates fit.
    std::vector<double> memory;
    for (const Plan& p : brute.plans) memory.push_back(p.memory_bytes);
    std::nth_element(memory.begin(), memory.begin() + memory.size() / 2, memory.end());
    req.cluster.memory_gb = memory[memory.size() / 2] / 1e9;
  }
  const PlanResult pruned = plan(req);
  EXPECT_EQ(brute.rejected.count("slower_than_top_plans"), 0u);
  EXPECT_EQ(brute.rejected.count("out_of_memory"), 0u);

  // Every candidate's bounds hold against its simulation.
  std::map<std::string, const Plan*> bounds;
  for (const Plan& e : brute.estimates) bounds[describe(e.config)] = &e;
  ASSERT_GT(brute.plans.size(), 0u);
  for (const Plan& p : brute.plans) {
    const Plan& bound = *bounds.at(describe(p.config));
    EXPECT_LE(bound.step_s, p.step_s * (1 + 1e-12)) << describe(p.config);
    EXPECT_LE(bound.memory_bytes, p.memory_bytes * (1 + 1e-12)) << describe(p.config);
  }

  std::vector<Plan> truth;
  for (const Plan& p : brute.plans)
    if (p.memory_bytes <= req.cluster.memory_gb * 1e9) truth.push_back(p);
  std::stable_sort(truth.begin(), truth.end(), [](const Plan& a, const Plan& b) {
    return std::tie(a.step_s, a.memory_bytes) < std::tie(b.step_s, b.memory_bytes);
  });
  ASSERT_FALSE(truth.empty());
  // The limit binds: some candidates do not fit, in the pruned search too.
  EXPECT_LT(truth.size(), brute.plans.size());
  EXPECT_GT(pruned.rejected.count("out_of_memory"), 0u);
  std::cout << GetParam().name << ": " << truth.size() << " of " << brute.plans.size()
            << " fit; pruned simulated " << pruned.simulated << " of " << brute.simulated
            << "; best " << describe(truth.front().config) << "\n";
  ASSERT_GE(pruned.plans.size(), std::min<size_t>(truth.size(), req.top));
  // Fewer simulations than the brute force, or the test proves nothing.
  EXPECT_LT(pruned.simulated, brute.simulated);
  for (size_t i = 0; i < std::min<size_t>(truth.size(), req.top); ++i) {
    EXPECT_EQ(pruned.plans[i].step_s, truth[i].step_s)
        << "rank " << i << ": " << describe(pruned.plans[i].config) << " against "
        << describe(truth[i].config);
    EXPECT_EQ(pruned.plans[i].memory_bytes, truth[i].memory_bytes) << "rank " << i;
  }
  // The best plan is the brute force's (or one exactly as fast and small).
  std::set<std::string> best;
  for (const Plan& p : truth)
    if (p.step_s == truth.front().step_s && p.memory_bytes == truth.front().memory_bytes)
      best.insert(describe(p.config));
  EXPECT_TRUE(best.count(describe(pruned.plans.front().config)))
      << describe(pruned.plans.front().config) << " against " << describe(truth.front().config);
}

// 2 to 64 GPUs, even and uneven layer counts, tied and untied, the limit at
// the median simulated memory.
std::vector<Case> sweep() {
  static const char* names[] = {"l5", "l8", "l12", "l5_tied", "l8_tied", "l12_tied"};
  std::vector<Case> out;
  for (int gpus : {2, 4, 8, 16, 32, 64}) {
    for (int k = 0; k < 6; ++k) {
      const int layers = k % 3 == 0 ? 5 : k % 3 == 1 ? 8 : 12;
      out.push_back({std::string(names[k]) + "_on_" + std::to_string(gpus) + "_gpus",
                     {layers, 1024, 8, 512, 16000, k >= 3},
                     gpus,
                     8,
                     0,
                     2 * gpus});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sweep, PlanBruteForce, ::testing::ValuesIn(sweep()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

INSTANTIATE_TEST_SUITE_P(Clusters, PlanBruteForce, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace baton::plan
