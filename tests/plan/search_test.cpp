// The planner's search on synthetic cases whose answer is known, its
// bookkeeping of rejections, and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "baton/core/error.h"
#include "baton/plan/search.h"

namespace baton::plan {
namespace {

// 8 layers of h = 4096 (about 1.6e9 parameters, 25.8 GB of Adam state) on 8
// GPUs of one node; one head, so t = 1 only; short sequences, so activations
// are small beside the model state.
PlanRequest eight_gpus(double memory_gb) {
  PlanRequest r;
  r.shape = ModelShape{8, 4096, 1, 128, 1000};
  r.cluster.gpus = 8;
  r.cluster.gpus_per_node = 8;
  r.cluster.memory_gb = memory_gb;
  r.cluster.peak_tflops = 100;
  r.batch = 8;
  return r;
}

// Model state per GPU of the rank holding stage 0, from the formulas alone.
double state_bytes(const PlanRequest& r, int p, int d, bool zero1) {
  const double h = r.shape.hidden, per_layer = 12 * h * h + 13 * h;
  const double embedding = (r.shape.vocab + r.shape.seq) * h;
  return (r.shape.layers / p * per_layer + embedding) * (4 + (zero1 ? 12.0 / d : 12.0));
}

TEST(PlanSearch, AModelThatFitsOnlyInFourOrMoreStagesGetsFourOrMore) {
  const PlanRequest r = eight_gpus(5);
  // p = 2 needs at least 3.5 bytes per parameter (d = 4, ZeRO-1): over 5 GB.
  ASSERT_GT(state_bytes(r, 2, 4, true), 5e9);
  ASSERT_LT(state_bytes(r, 4, 2, true), 5e9);
  const PlanResult result = plan(r);
  ASSERT_FALSE(result.plans.empty());
  int smallest_p = 1 << 30;
  for (const Plan& p : result.plans) {
    EXPECT_GE(p.config.p, 4) << "t=" << p.config.t << " d=" << p.config.d;
    EXPECT_LE(p.memory_bytes, 5e9);
    EXPECT_GE(p.memory_bytes, state_bytes(r, p.config.p, p.config.d, p.config.zero1));
    smallest_p = std::min(smallest_p, p.config.p);
  }
  EXPECT_EQ(smallest_p, 4);
  EXPECT_GT(result.rejected.at("out_of_memory"), 0);
}

TEST(PlanSearch, WithTheBubbleDominatingTheBestPlanRunsTheMostMicrobatches) {
  // Memory forces p = 8 (d = 1); GEMMs reach full efficiency at any size, so
  // the micro-batch size changes only the bubble (p - 1) / (m + p - 1).
  PlanRequest r = eight_gpus(3.4);
  r.schedules = {"1f1b"};
  r.batch = 64;
  r.cluster.efficiency_half_size = 1e-9;
  const PlanResult result = plan(r);
  ASSERT_FALSE(result.plans.empty());
  const Plan& best = result.plans.front();
  EXPECT_EQ(best.config.p, 8);
  EXPECT_EQ(best.config.microbatch, 1);
  EXPECT_EQ(best.config.microbatches, 64);
  // The lecture's 1F1B bubble over the makespan, with the last stage's logits
  // and transfers making it only approximately so.
  EXPECT_NEAR(best.bubble_fraction, 7.0 / (64 + 7), 0.02);
  for (const Plan& p : result.plans) EXPECT_GE(p.step_s, best.step_s);
}

TEST(PlanSearch, EveryCandidateIsPlannedOrRejectedWithAReason) {
  PlanRequest r = eight_gpus(6);
  r.shape.heads = 2;
  r.shape.layers = 12;  // p = 8 does not divide; interleaved needs 2p | 12
  r.batch = 12;         // d = 8 does not divide
  r.simulate_limit = 3;
  const PlanResult result = plan(r);
  const std::set<std::string> per_factorization = {
      "t_does_not_divide_heads", "t_does_not_tile_nodes", "p_does_not_divide_layers",
      "d_does_not_divide_batch"};
  const std::set<std::string> per_candidate = {
      "layers_not_divisible_by_stages", "schedule_undefined_for_m", "out_of_memory",
      "slower_microbatch_size",         "beyond_simulate_limit",    "too_large_to_simulate"};
  long factorizations = 0, candidates = 0;
  for (const auto& [reason, n] : result.rejected) {
    EXPECT_GT(n, 0) << reason;
    if (per_factorization.count(reason))
      factorizations += n;
    else if (per_candidate.count(reason))
      candidates += n;
    else
      ADD_FAILURE() << "unknown reason " << reason;
  }
  EXPECT_EQ(candidates + static_cast<long>(result.plans.size()), result.candidates);
  // Of the 10 ordered (t, p, d) with t p d = 8, five break a rule:
  // (4,1,2), (4,2,1), (8,1,1) the heads, (1,8,1) the layers, (1,1,8) the batch.
  EXPECT_EQ(factorizations, 5);
  EXPECT_EQ(result.rejected.at("t_does_not_divide_heads"), 3);
  EXPECT_EQ(result.rejected.at("p_does_not_divide_layers"), 1);
  EXPECT_EQ(result.rejected.at("d_does_not_divide_batch"), 1);
  EXPECT_GT(result.rejected.at("beyond_simulate_limit"), 0);
  EXPECT_LE(result.plans.size(), 3u);
}

TEST(PlanSearch, TensorParallelGroupsTileTheNodes) {
  // 12 GPUs in nodes of 4, 12 heads: t = 3, 6 would straddle nodes; t = 12 spans three.
  PlanRequest r = eight_gpus(80);
  r.shape.heads = 12;
  r.shape.hidden = 4104;
  r.cluster.gpus = 12;
  r.cluster.gpus_per_node = 4;
  r.batch = 12;
  const PlanResult result = plan(r);
  std::set<int> ts;
  for (const Plan& p : result.estimates) ts.insert(p.config.t);
  EXPECT_EQ(ts, (std::set<int>{1, 2, 4, 12}));
  EXPECT_GT(result.rejected.at("t_does_not_tile_nodes"), 0);
}

std::string error_of(const PlanRequest& r) {
  try {
    plan(r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PlanSearch, GpuCountsThatNoAllowedGridFactorsAreRefusedWithEachRule) {
  PlanRequest r = eight_gpus(80);
  r.cluster.gpus = 7;
  const std::string error = error_of(r);
  EXPECT_NE(error.find("no (t, p, d) with t*p*d = 7 GPUs"), std::string::npos) << error;
  EXPECT_NE(error.find("d=7 does not divide batch=8"), std::string::npos) << error;
  EXPECT_NE(error.find("p=7 does not divide layers=8"), std::string::npos) << error;
  EXPECT_NE(error.find("t=7 does not divide heads=1"), std::string::npos) << error;
}

TEST(PlanSearch, HeadsThatNoTensorParallelSizeDividesAreNamed) {
  PlanRequest r = eight_gpus(80);
  r.shape = ModelShape{1, 70, 7, 16, 10};
  r.cluster.gpus = 2;
  r.batch = 1;
  const std::string error = error_of(r);
  EXPECT_NE(error.find("t=2 does not divide heads=7"), std::string::npos) << error;
}

TEST(PlanSearch, TooLittleMemoryNamesTheSmallestThatFits) {
  const std::string error = error_of(eight_gpus(1));
  const std::string key = "the smallest needs ";
  const size_t at = error.find(key);
  ASSERT_NE(at, std::string::npos) << error;
  const double needed_gb = std::stod(error.substr(at + key.size()));
  // p = 8 on one GPU each holds 1/8 of the state: just over 3.2 GB.
  EXPECT_GT(needed_gb, 3.2);
  EXPECT_LT(needed_gb, 3.6);
  EXPECT_FALSE(plan(eight_gpus(needed_gb)).plans.empty());
  EXPECT_THROW(plan(eight_gpus(needed_gb - 0.2)), Error);
}

}  // namespace
}  // namespace baton::plan
