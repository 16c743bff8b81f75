// Stage costs from a measured profile against hand sums of its layers: the
// uniform cut of `baton train`, times and activations scaled with the
// micro-batch, Adam's state on the parameters by ZeRO stage; and the parser's
// refusals.
#include <gtest/gtest.h>

#include "baton/core/error.h"
#include "baton/plan/profile.h"
#include "baton/plan/search.h"

namespace baton::plan {
namespace {

// Five layers, layer i: F = i + 1 ms, I = 2 (i + 1) ms, W = 3 (i + 1) ms,
// activations 100 (i + 1), parameters 1000 (i + 1), output 10 (i + 1) bytes,
// profiled at micro-batch 4.
Profile five_layers() {
  Profile p;
  p.model = {{"model", "mlp"}, {"layers", 5}};
  p.microbatch = 4;
  for (int i = 0; i < 5; ++i) {
    const double k = i + 1;
    p.layers.push_back({k * 1e-3, 2 * k * 1e-3, 3 * k * 1e-3, 100 * k, 1000 * k, 10 * k});
  }
  return p;
}

Cluster two_gpus() {
  Cluster c;
  c.gpus = 2;
  c.gpus_per_node = 2;
  c.intra_node_gbps = 800;  // 100 GB/s
  c.intra_node_latency_us = 3;
  return c;
}

TEST(PlanProfile, StageCostsAreTheHandSumsOfTheUniformCut) {
  Config c;
  c.p = 2;
  c.microbatch = 4;
  const sim::CostModel m = profiled_stage_costs(five_layers(), two_gpus(), c);
  ASSERT_EQ(m.stages.size(), 2u);
  // partition::uniform(5, 2) gives the first stage the extra layer: {0,1,2}, {3,4}.
  EXPECT_DOUBLE_EQ(m.stages[0].forward, (1 + 2 + 3) * 1e-3);
  EXPECT_DOUBLE_EQ(m.stages[0].input_backward, 2 * (1 + 2 + 3) * 1e-3);
  EXPECT_DOUBLE_EQ(m.stages[0].weight_backward, 3 * (1 + 2 + 3) * 1e-3);
  EXPECT_DOUBLE_EQ(m.stages[1].forward, (4 + 5) * 1e-3);
  EXPECT_DOUBLE_EQ(m.stages[1].activation_bytes, 100 * (4 + 5));
  EXPECT_DOUBLE_EQ(m.stages[0].parameter_bytes, 4 * 1000 * (1 + 2 + 3));
  EXPECT_DOUBLE_EQ(m.stages[0].boundary_bytes, 10 * 3);
  EXPECT_DOUBLE_EQ(m.stages[1].boundary_bytes, 10 * 5);
  EXPECT_DOUBLE_EQ(m.comm_latency, 3e-6);
  EXPECT_DOUBLE_EQ(m.comm_bytes_per_time, 100e9);
}

// Adam's state by ZeRO stage, counted by hand from what the runtime holds at
// a rank's peak per parameter byte: weights 1, whole gradients 1, moments 2
// (over d from ZeRO-1), and under ZeRO-3 the weights' 1/d shard beside them.
TEST(PlanProfile, ParameterStateFollowsTheZeroStage) {
  Config c;
  c.p = 2;
  c.microbatch = 4;
  const double layers = 1000 * (1 + 2 + 3);  // stage 0's parameter bytes
  for (int d : {1, 2, 4}) {
    c.d = d;
    const double by_zero[4] = {1 + 1 + 2.0, 1 + 1 + 2.0 / d, 1 + 1 + 2.0 / d, 1 + 1 + 3.0 / d};
    for (int zero = 0; zero <= 3; ++zero) {
      c.zero = zero;
      const double want = layers * (d == 1 ? 4 : by_zero[zero]);
      EXPECT_DOUBLE_EQ(profiled_stage_costs(five_layers(), two_gpus(), c).stages[0].parameter_bytes,
                       want)
          << "d " << d << " zero " << zero;
    }
  }
}

TEST(PlanProfile, TimesAndActivationsScaleLinearlyWithTheMicrobatchParametersDoNot) {
  Config c;
  c.p = 1;
  c.microbatch = 4;
  const sim::CostModel at4 = profiled_stage_costs(five_layers(), two_gpus(), c);
  c.microbatch = 12;
  const sim::CostModel at12 = profiled_stage_costs(five_layers(), two_gpus(), c);
  c.microbatch = 1;
  const sim::CostModel at1 = profiled_stage_costs(five_layers(), two_gpus(), c);
  EXPECT_DOUBLE_EQ(at4.stages[0].forward, 15e-3);
  EXPECT_DOUBLE_EQ(at12.stages[0].forward, 3 * 15e-3);
  EXPECT_DOUBLE_EQ(at1.stages[0].weight_backward, 45e-3 / 4);
  EXPECT_DOUBLE_EQ(at12.stages[0].activation_bytes, 3 * 1500.0);
  EXPECT_DOUBLE_EQ(at12.stages[0].boundary_bytes, 3 * 50.0);
  EXPECT_DOUBLE_EQ(at12.stages[0].parameter_bytes, at4.stages[0].parameter_bytes);
}

// With fixed parts, a time is fixed + (time - fixed) b / profiled b: at the
// profiled b unchanged, at 3b the fixed part counted once, at b = 1 the
// fixed part plus a quarter of the rest.
TEST(PlanProfile, FixedPartsDoNotScaleWithTheMicrobatch) {
  Profile p = five_layers();
  for (auto& l : p.layers) {
    l.forward_fixed_s = l.forward_s / 2;
    l.backward_fixed_s = (l.input_backward_s + l.weight_backward_s) / 5;  // 1 of 5 units
  }
  Config c;
  c.p = 1;
  c.microbatch = 4;
  const sim::CostModel at4 = profiled_stage_costs(p, two_gpus(), c);
  EXPECT_NEAR(at4.stages[0].forward, 15e-3, 1e-12);
  EXPECT_NEAR(at4.stages[0].input_backward, 30e-3, 1e-12);
  c.microbatch = 12;
  const sim::CostModel at12 = profiled_stage_costs(p, two_gpus(), c);
  EXPECT_NEAR(at12.stages[0].forward, 7.5e-3 + 3 * 7.5e-3, 1e-12);
  // Whole backward of layer k: 5k ms, fixed k ms, so each half's fixed part is k/2 ms.
  EXPECT_NEAR(at12.stages[0].input_backward, 7.5e-3 + 3 * (30e-3 - 7.5e-3), 1e-12);
  EXPECT_NEAR(at12.stages[0].weight_backward, 7.5e-3 + 3 * (45e-3 - 7.5e-3), 1e-12);
  c.microbatch = 1;
  const sim::CostModel at1 = profiled_stage_costs(p, two_gpus(), c);
  EXPECT_NEAR(at1.stages[0].forward, 7.5e-3 + 7.5e-3 / 4, 1e-12);
}

// Timings at larger micro-batches (the whole mini-batch, from --profile-out)
// replace the line above the profiled b: at a timed b the timing itself,
// between two the straight line through them, past the last the last
// segment extended; at or below the profiled b nothing changes. The
// backward keeps the profile's I : W split (here 2 : 3).
TEST(PlanProfile, LargerTimingsBendTheLineAboveTheProfiledMicrobatch) {
  Profile p = five_layers();
  for (auto& l : p.layers) {
    // Layer k at b = 4: F k, B 5k ms. At 16: F 3k, B 12k; at 32: F 5k, B 20k.
    const double k = l.forward_s / 1e-3;
    l.larger = {{16, 3 * k * 1e-3, 12 * k * 1e-3}, {32, 5 * k * 1e-3, 20 * k * 1e-3}};
  }
  Config c;
  c.p = 1;
  auto at = [&](int b) {
    c.microbatch = b;
    return profiled_stage_costs(p, two_gpus(), c).stages[0];
  };
  const double sum_k = 15;  // 1 + 2 + ... + 5
  EXPECT_NEAR(at(4).forward, sum_k * 1e-3, 1e-12);
  EXPECT_NEAR(at(2).forward, sum_k * 0.5e-3, 1e-12);  // below b0: as before, linear
  EXPECT_NEAR(at(16).forward, 3 * sum_k * 1e-3, 1e-12);
  EXPECT_NEAR(at(16).input_backward + at(16).weight_backward, 12 * sum_k * 1e-3, 1e-12);
  EXPECT_NEAR(at(16).input_backward / at(16).weight_backward, 2.0 / 3.0, 1e-9);
  EXPECT_NEAR(at(10).forward, 2 * sum_k * 1e-3, 1e-12);  // halfway from 4 to 16
  EXPECT_NEAR(at(24).forward, 4 * sum_k * 1e-3, 1e-12);  // halfway from 16 to 32
  EXPECT_NEAR(at(64).forward, 9 * sum_k * 1e-3, 1e-12);  // 32 -> 64 at the last slope
  // Without them, 64 would cost 16 times b0's forward.
  c.microbatch = 64;
  EXPECT_NEAR(profiled_stage_costs(five_layers(), two_gpus(), c).stages[0].forward,
              16 * sum_k * 1e-3, 1e-12);
}

TEST(PlanProfile, TheSlowestRanksOptimizerStepIsItsParameterBytesTimesTheRate) {
  Profile p = five_layers();
  p.optimizer_s_per_parameter_byte = 1e-9;
  Config c;
  c.p = 2;
  c.microbatch = 4;
  // Ranks hold layers {0,1,2} (6000 bytes) and {3,4} (9000 bytes).
  EXPECT_DOUBLE_EQ(profiled_optimizer_seconds(p, c), 9000e-9);
  c.p = 1;
  EXPECT_DOUBLE_EQ(profiled_optimizer_seconds(p, c), 15000e-9);
  EXPECT_DOUBLE_EQ(profiled_optimizer_seconds(five_layers(), c), 0);
  // ZeRO-1 over d = 2 replicas halves it.
  c.d = 2;
  c.zero = 1;
  EXPECT_DOUBLE_EQ(profiled_optimizer_seconds(p, c), 15000e-9 / 2);
}

TEST(PlanProfile, TwoChunkSchedulesCutPTimesVStages) {
  Config c;
  c.p = 2;
  c.virtual_stages = 2;
  c.schedule = "interleaved";
  c.microbatch = 4;
  const sim::CostModel m = profiled_stage_costs(five_layers(), two_gpus(), c);
  ASSERT_EQ(m.stages.size(), 4u);  // {0,1}, {2}, {3}, {4}
  EXPECT_DOUBLE_EQ(m.stages[0].forward, 3e-3);
  EXPECT_DOUBLE_EQ(m.stages[3].forward, 5e-3);
  // Rank 0 holds stages 0 and 2: layers 0, 1 and 3.
  EXPECT_DOUBLE_EQ(profiled_gradient_bytes(five_layers(), c), 1000 + 2000 + 4000);
}

TEST(PlanProfile, TheActionOverheadChargesEachStagesFAndIButNotW) {
  Profile p = five_layers();
  p.action_overhead_s = 0.5e-3;
  Config c;
  c.p = 2;
  c.microbatch = 4;
  const sim::CostModel m = profiled_stage_costs(p, two_gpus(), c);
  EXPECT_DOUBLE_EQ(m.stages[0].forward, (1 + 2 + 3) * 1e-3 + 0.5e-3);
  EXPECT_DOUBLE_EQ(m.stages[0].input_backward, 2 * (1 + 2 + 3) * 1e-3 + 0.5e-3);
  EXPECT_DOUBLE_EQ(m.stages[0].weight_backward, 3 * (1 + 2 + 3) * 1e-3);
  // It does not scale with the micro-batch: at b = 8 the layers double, it stays.
  c.microbatch = 8;
  EXPECT_DOUBLE_EQ(profiled_stage_costs(p, two_gpus(), c).stages[1].forward,
                   2 * (4 + 5) * 1e-3 + 0.5e-3);
  // Two chunks a rank: each chunk is a stage and pays it (rank 0: stages 0 and 2).
  c.microbatch = 4;
  c.virtual_stages = 2;
  c.schedule = "interleaved";
  const sim::CostModel v = profiled_stage_costs(p, two_gpus(), c);
  ASSERT_EQ(v.stages.size(), 4u);
  EXPECT_DOUBLE_EQ(v.stages[2].forward, 4e-3 + 0.5e-3);
}

TEST(PlanProfile, TheStepOverheadAddsToEveryPlansStep) {
  PlanRequest req;
  req.profile = five_layers();
  req.cluster = two_gpus();
  req.batch = 8;
  const PlanResult without = plan(req);
  req.profile->step_overhead_s = 0.25;
  const PlanResult with = plan(req);
  ASSERT_FALSE(without.plans.empty());
  ASSERT_EQ(with.plans.size(), without.plans.size());
  // A constant per step changes no ranking: the same plans, each 0.25 s longer.
  for (size_t i = 0; i < with.plans.size(); ++i) {
    EXPECT_EQ(with.plans[i].config.schedule, without.plans[i].config.schedule);
    EXPECT_EQ(with.plans[i].config.p, without.plans[i].config.p);
    EXPECT_NEAR(with.plans[i].step_s - without.plans[i].step_s, 0.25, 1e-12);
  }
}

TEST(PlanProfile, SearchKeepsTOneAndPAtMostTheLayers) {
  PlanRequest req;
  req.profile = five_layers();
  req.cluster = two_gpus();
  req.cluster.gpus = 8;
  req.cluster.gpus_per_node = 8;
  req.batch = 8;
  const PlanResult r = plan(req);
  ASSERT_FALSE(r.plans.empty());
  for (const Plan& p : r.plans) {
    EXPECT_EQ(p.config.t, 1);
    EXPECT_LE(p.config.p * p.config.virtual_stages, 5);
    EXPECT_FALSE(p.config.recompute);
  }
  EXPECT_EQ(r.rejected.at("p_exceeds_profiled_layers"), 1);  // p = 8
}

TEST(PlanProfile, ParserNamesTheFileAndTheMissingField) {
  const std::string good =
      R"({"baton_profile": 2, "model": {"model": "mlp"}, "microbatch": 2, "layers": [)"
      R"({"forward_s": 1, "input_backward_s": 1, "weight_backward_s": 1, "activation_bytes": 1,)"
      R"( "parameter_bytes": 1, "output_bytes": 1}]})";
  EXPECT_EQ(parse_profile(good, "p.json").layers.size(), 1u);
  auto message = [](const std::string& text) {
    try {
      parse_profile(text, "p.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("{").find("p.json is not JSON"), std::string::npos);
  EXPECT_NE(message("{}").find("not a baton profile"), std::string::npos);
  std::string no_forward = good;
  no_forward.replace(no_forward.find("forward_s"), 9, "forwardxx");
  EXPECT_NE(message(no_forward).find("layer 0 has no number \"forward_s\""), std::string::npos);
  std::string negative = good;
  negative.replace(negative.find("\"microbatch\": 2"), 15, "\"microbatch\": 0");
  EXPECT_NE(message(negative).find("\"microbatch\" is 0"), std::string::npos);
  std::string overhead = good;
  overhead.replace(overhead.find("\"layers\""), 8, "\"action_overhead_s\": -1, \"layers\"");
  EXPECT_NE(message(overhead).find("\"action_overhead_s\" is -1"), std::string::npos);
  std::string step = good;
  step.replace(step.find("\"layers\""), 8, "\"step_overhead_s\": 0.5, \"layers\"");
  EXPECT_DOUBLE_EQ(parse_profile(step, "p.json").step_overhead_s, 0.5);
  std::string larger = good;
  larger.replace(larger.find("\"output_bytes\": 1"), 17,
                 "\"output_bytes\": 1, \"larger\": [{\"microbatch\": 8, \"forward_s\": 3, "
                 "\"backward_s\": 4}]");
  ASSERT_EQ(parse_profile(larger, "p.json").layers[0].larger.size(), 1u);
  EXPECT_DOUBLE_EQ(parse_profile(larger, "p.json").layers[0].larger[0].backward_s, 4);
  std::string not_larger = larger;
  not_larger.replace(not_larger.find("\"microbatch\": 8"), 15, "\"microbatch\": 2");
  EXPECT_NE(message(not_larger).find("layer 0's larger[0] has \"microbatch\" 2; it must exceed"),
            std::string::npos)
      << message(not_larger);
}

// Issue 16.9: a folder given as --profile was "not JSON".
TEST(PlanProfile, AFolderIsCalledAFolderNotJson) {
  try {
    read_profile("/tmp");
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[plan] --profile /tmp is a folder; name a file written by baton train "
                 "--profile-out");
  }
}

}  // namespace
}  // namespace baton::plan
