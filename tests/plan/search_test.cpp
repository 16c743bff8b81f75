// The planner's search on synthetic cases whose answer is known, its
// bookkeeping of rejections, and its errors.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <tuple>

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
// ZeRO-1/2: Adam's 12 bytes over d; ZeRO-3 also the 2-byte weight shard
// beside the gathered weights (plan/model.h).
double state_bytes(const PlanRequest& r, int p, int d, int zero) {
  const double h = r.shape.hidden, per_layer = 12 * h * h + 13 * h;
  const double embedding = (r.shape.vocab + r.shape.seq) * h;
  const double per_parameter = zero == 0 ? 16 : zero == 3 ? 4 + 14.0 / d : 4 + 12.0 / d;
  return (r.shape.layers / p * per_layer + embedding) * per_parameter;
}

TEST(PlanSearch, AModelThatFitsOnlyInFourOrMoreStagesGetsFourOrMore) {
  const PlanRequest r = eight_gpus(5);
  // p = 2 needs at least 3.5 bytes per parameter (d = 4, ZeRO-1): over 5 GB.
  ASSERT_GT(state_bytes(r, 2, 4, 1), 5e9);
  ASSERT_LT(state_bytes(r, 4, 2, 1), 5e9);
  const PlanResult result = plan(r);
  ASSERT_FALSE(result.plans.empty());
  int smallest_p = 1 << 30;
  for (const Plan& p : result.plans) {
    EXPECT_GE(p.config.p, 4) << "t=" << p.config.t << " d=" << p.config.d;
    EXPECT_LE(p.memory_bytes, 5e9);
    EXPECT_GE(p.memory_bytes, state_bytes(r, p.config.p, p.config.d, p.config.zero));
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
  r.shape.layers = 12;  // p = 8 takes uneven stages; interleaved at p = 8 leaves chunks empty
  r.batch = 12;         // d = 8 does not divide
  r.simulate_limit = 3;
  const PlanResult result = plan(r);
  const std::set<std::string> per_factorization = {"t_does_not_divide_heads",
                                                   "t_does_not_tile_nodes", "p_exceeds_layers",
                                                   "d_does_not_divide_batch"};
  const std::set<std::string> per_candidate = {
      "schedule_needs_p_above_1", "zero_needs_d_above_1", "layers_fewer_than_stages",
      "schedule_undefined_for_m", "out_of_memory",        "slower_than_top_plans",
      "beyond_simulate_limit",    "too_large_to_simulate"};
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
  // Of the 10 ordered (t, p, d) with t p d = 8, four break a rule:
  // (4,1,2), (4,2,1), (8,1,1) the heads, (1,1,8) the batch.
  EXPECT_EQ(factorizations, 4);
  EXPECT_EQ(result.rejected.at("t_does_not_divide_heads"), 3);
  EXPECT_EQ(result.rejected.at("d_does_not_divide_batch"), 1);
  EXPECT_GT(result.rejected.at("beyond_simulate_limit"), 0);
  EXPECT_GT(result.rejected.at("layers_fewer_than_stages"), 0);
  EXPECT_EQ(result.simulated, 3);
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
  r.shape.layers = 6;
  const std::string error = error_of(r);
  EXPECT_NE(error.find("no (t, p, d) with t*p*d = 7 GPUs"), std::string::npos) << error;
  EXPECT_NE(error.find("d=7 does not divide batch=8"), std::string::npos) << error;
  EXPECT_NE(error.find("p=7 exceeds the layers=6"), std::string::npos) << error;
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

TEST(PlanSearch, ConstraintsHoldEveryPlanToThem) {
  PlanRequest r = eight_gpus(80);
  r.shape.heads = 8;
  r.schedules = {"1f1b", "interleaved"};
  r.recompute = {Recompute::Always};
  r.zero = {0};
  r.pp = 2;
  r.microbatch = 1;
  const PlanResult result = plan(r);
  ASSERT_FALSE(result.plans.empty());
  std::set<int> ts;
  for (const Plan& p : result.plans) {
    EXPECT_TRUE(p.config.schedule == "1f1b" || p.config.schedule == "interleaved");
    EXPECT_TRUE(p.config.recompute);
    EXPECT_EQ(p.config.zero, 0);
    EXPECT_EQ(p.config.p, 2);
    EXPECT_EQ(p.config.microbatch, 1);
    ts.insert(p.config.t);
  }
  EXPECT_GT(ts.size(), 1u);  // t and d still searched
  r.tp = 2;
  r.dp = 2;
  for (const Plan& p : plan(r).plans)
    EXPECT_EQ(std::make_tuple(p.config.t, p.config.d), std::make_tuple(2, 2));
}

TEST(PlanSearch, HardwareFlopsCountTheRecomputedForwardModelFlopsDoNot) {
  PlanRequest r = eight_gpus(80);
  r.recompute = {Recompute::Always};
  const Plan best = plan(r).plans.front();
  const ModelShape& m = r.shape;
  const double B = r.batch, s = m.seq, l = m.layers, h = m.hidden, V = m.vocab;
  // Narayanan et al. 2021 eq. 3, and the same less one forward of the layers.
  const double hardware = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h));
  const double model = 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V;
  EXPECT_NEAR(best.hardware_tflops_per_gpu, hardware / best.step_s / 8 / 1e12, 1e-9);
  EXPECT_NEAR(best.model_tflops_per_gpu, model / best.step_s / 8 / 1e12, 1e-9);
  EXPECT_NEAR(best.hfu, best.hardware_tflops_per_gpu / 100, 1e-12);
  EXPECT_NEAR(best.mfu, best.model_tflops_per_gpu / 100, 1e-12);
  r.recompute = {Recompute::Never};
  const Plan plain = plan(r).plans.front();
  EXPECT_DOUBLE_EQ(plain.hardware_tflops_per_gpu, plain.model_tflops_per_gpu);
}

// By default every ZeRO stage and recomputation mode is a candidate: the
// estimates hold each of them where d > 1, and a search limited to one
// returns only it.
TEST(PlanSearch, SearchesEveryZeroStageAndRecomputationMode) {
  PlanRequest r = eight_gpus(80);
  r.schedules = {"1f1b"};
  std::set<int> zeros;
  std::set<std::pair<bool, bool>> modes;  // (full, selective)
  for (const Plan& p : plan(r).estimates) {
    if (p.config.d > 1) zeros.insert(p.config.zero);
    modes.insert({p.config.recompute, p.config.selective});
    EXPECT_FALSE(p.config.recompute && p.config.selective);
  }
  EXPECT_EQ(zeros, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(modes.size(), 3u);
  r.zero = {3};
  r.recompute = {Recompute::Selective};
  const PlanResult only = plan(r);
  ASSERT_FALSE(only.plans.empty());
  for (const Plan& p : only.plans) {
    EXPECT_EQ(p.config.zero, 3);
    EXPECT_TRUE(p.config.selective);
    EXPECT_NE(describe(p.config).find("selective zero3"), std::string::npos) << describe(p.config);
  }
}

TEST(PlanSearch, ConstraintsThatLeaveNothingNameTheRuleThatRemovedTheLastCandidates) {
  PlanRequest r = eight_gpus(80);
  r.pp = 1;
  r.schedules = {"zb-v"};  // at p = 1 only 1f1b
  EXPECT_NE(error_of(r).find("schedule_needs_p_above_1 removed the last candidates"),
            std::string::npos)
      << error_of(r);
  r = eight_gpus(80);
  r.dp = 1;
  r.zero = {1};
  EXPECT_NE(error_of(r).find("zero_needs_d_above_1 removed the last candidates"), std::string::npos)
      << error_of(r);
  r = eight_gpus(80);
  r.pp = 8;
  r.schedules = {"zb-v"};  // 16 stages for 8 layers
  EXPECT_NE(error_of(r).find("layers_fewer_than_stages removed the last candidates"),
            std::string::npos)
      << error_of(r);
  r = eight_gpus(80);
  r.pp = 8;
  r.schedules = {"zb-h2"};  // needs m >= 2p = 16 of a batch of 8
  EXPECT_NE(error_of(r).find("schedule_undefined_for_m removed the last candidates"),
            std::string::npos)
      << error_of(r);
  r = eight_gpus(80);
  r.tp = 3;
  EXPECT_NE(error_of(r).find("--tp 3 does not divide --gpus 8"), std::string::npos) << error_of(r);
  r = eight_gpus(80);
  r.max_memory_fraction = 0.01;
  EXPECT_NE(error_of(r).find("out_of_memory removed the last candidates"), std::string::npos)
      << error_of(r);
}

TEST(PlanSearch, MaxMemoryFractionLowersTheLimit) {
  // 3.4 GB fits p = 8 (see above); 4 GB x 0.85 does too, 4 GB x 0.8 does not.
  PlanRequest r = eight_gpus(4);
  r.max_memory_fraction = 0.85;
  for (const Plan& p : plan(r).plans) EXPECT_LE(p.memory_bytes, 4e9 * 0.85);
  r.max_memory_fraction = 0.7;
  EXPECT_THROW(plan(r), Error);
}

TEST(PlanSearch, EverySearchedScheduleReachesTheSimulator) {
  PlanRequest r = eight_gpus(80);
  r.shape.layers = 16;
  r.batch = 64;
  r.top = 1 << 30;  // simulate every candidate
  std::set<std::string> seen;
  std::set<int> interleaved_v;
  bool uneven = false;
  for (const Plan& p : plan(r).plans) {
    seen.insert(p.config.schedule);
    if (p.config.schedule == "interleaved") interleaved_v.insert(p.config.virtual_stages);
    uneven = uneven || !p.config.stage_layers.empty();
  }
  for (const char* name : {"1f1b", "gpipe", "interleaved", "interleaved-zb", "zb-h1", "zb-h2",
                           "zb-v", "dualpipev", "v-half", "v-min"})
    EXPECT_TRUE(seen.count(name)) << name;
  EXPECT_TRUE(interleaved_v.count(3)) << "v = 3";
  EXPECT_TRUE(interleaved_v.count(8)) << "v = 8 at p = 2";
  EXPECT_TRUE(uneven) << "p = 3, 5, 6, 7 cannot cut 16 layers evenly";
}

}  // namespace
}  // namespace baton::plan
