// A configuration's costs against figures computed here from the stated
// model: compute at the achieved rate, the tensor-parallel all-reduces and
// which link carries them, the data-parallel all-reduce, and memory.
#include <gtest/gtest.h>

#include "baton/plan/costs.h"
#include "baton/sim/stream_stats.h"

namespace baton::plan {
namespace {

const ModelShape kShape{8, 1024, 16, 512, 1000};

Cluster cluster() {
  Cluster c;
  c.gpus = 16;
  c.gpus_per_node = 4;
  c.peak_tflops = 100;
  c.intra_node_gbps = 800;  // 100 GB/s
  c.inter_node_gbps = 80;   // 10 GB/s
  c.intra_node_latency_us = 2;
  c.inter_node_latency_us = 20;
  c.efficiency = 0.5;
  c.efficiency_half_size = 1 << 20;
  return c;
}

TEST(PlanCosts, EfficiencyFallsAsThePerGpuGemmShrinks) {
  const Cluster c = cluster();
  // x = b s h / t = 2^20 at b = 2, t = 1: half of 0.5.
  EXPECT_DOUBLE_EQ(gemm_efficiency(c, kShape, 2, 1), 0.25);
  EXPECT_GT(gemm_efficiency(c, kShape, 8, 1), gemm_efficiency(c, kShape, 2, 1));
  EXPECT_LT(gemm_efficiency(c, kShape, 2, 4), gemm_efficiency(c, kShape, 2, 1));
}

TEST(PlanCosts, RingAllReduceMovesTwiceTheBytesLessAShare) {
  EXPECT_DOUBLE_EQ(allreduce_seconds(1e9, 4, 80, 20), 2.0 * 3 / 4 * 1e9 / 10e9 + 20e-6);
  EXPECT_DOUBLE_EQ(allreduce_seconds(1e9, 1, 80, 20), 0);
}

TEST(PlanCosts, StageTimesAreTheLayersWorkPlusTwoAllReducesEachWay) {
  const Cluster c = cluster();
  Config config;
  config.t = 4, config.p = 2, config.d = 2, config.microbatch = 2, config.microbatches = 4;
  const sim::CostModel costs = stage_costs(kShape, c, config);
  ASSERT_EQ(costs.stages.size(), 2u);
  const double b = 2, s = 512, h = 1024, layers_per_stage = 4;
  const double rate = 100e12 * gemm_efficiency(c, kShape, 2, 4);
  const double layer = 24 * b * s * h * h * (1 + s / (6 * h)) / 4 / rate;
  const double allreduce = 2.0 * 3 / 4 * (2 * b * s * h) / 100e9 + 2e-6;  // t = 4 <= G: in node
  EXPECT_NEAR(costs.stages[0].forward, layers_per_stage * (layer + 2 * allreduce), 1e-15);
  EXPECT_NEAR(costs.stages[0].input_backward, layers_per_stage * (layer + 2 * allreduce), 1e-15);
  EXPECT_NEAR(costs.stages[0].weight_backward, layers_per_stage * layer, 1e-15);
  const double logits = 2 * b * s * h * 1000 / 4 / rate;
  EXPECT_NEAR(costs.stages[1].weight_backward, layers_per_stage * layer + logits, 1e-15);
  EXPECT_DOUBLE_EQ(costs.stages[0].boundary_bytes, 2 * b * s * h);
  // t d p = 16 > G: the pipeline crosses nodes.
  EXPECT_DOUBLE_EQ(costs.comm_bytes_per_time, 10e9);
  EXPECT_DOUBLE_EQ(costs.comm_latency, 20e-6);

  config.recompute = true;
  EXPECT_NEAR(stage_costs(kShape, c, config).stages[0].input_backward,
              2 * layers_per_stage * (layer + 2 * allreduce), 1e-15);
}

TEST(PlanCosts, TensorParallelGroupsWiderThanANodeUseTheSlowLink) {
  const Cluster c = cluster();
  Config in_node, across;
  in_node.t = 4, in_node.d = 4;
  across.t = 8, across.d = 2;
  EXPECT_TRUE(tensor_parallel_in_node(c, in_node));
  EXPECT_FALSE(tensor_parallel_in_node(c, across));
  const double b = 1, s = 512, h = 1024;
  const double compute = stage_costs(kShape, c, across).stages[0].weight_backward / 8;
  EXPECT_NEAR(stage_costs(kShape, c, across).stages[0].forward / 8 - compute,
              2 * (2.0 * 7 / 8 * (2 * b * s * h) / 10e9 + 20e-6), 1e-12);
}

TEST(PlanCosts, DataParallelAllReduceHidesBehindTheLastBackward) {
  Cluster c = cluster();
  Config config;
  config.p = 1, config.d = 16;
  const sim::CostModel costs = stage_costs(kShape, c, config);
  const double params = 8 * (12.0 * 1024 * 1024 + 13 * 1024) + (1000 + 512) * 1024.0;
  const double allreduce = 2.0 * 15 / 16 * 2 * params / 10e9 + 20e-6;  // t d = 16 > G
  EXPECT_NEAR(dp_allreduce_seconds(kShape, c, config), allreduce, 1e-12);
  EXPECT_NEAR(dp_exposed_seconds(kShape, c, config, costs),
              std::max(0.0, allreduce - costs.backward(0)), 1e-12);
  c.inter_node_gbps = 1e6;  // a link so fast that the backward hides it all
  EXPECT_EQ(dp_exposed_seconds(kShape, c, config, stage_costs(kShape, c, config)), 0);
}

TEST(PlanCosts, EstimatedMemoryOfOneFOneBIsTheSimulatedPeakOnRankZero) {
  const Cluster c = cluster();
  Config config;
  config.p = 4, config.d = 4, config.microbatch = 1, config.microbatches = 8, config.zero1 = true;
  const sim::CostModel costs = stage_costs(kShape, c, config);
  const auto source = sim::closed_form_source(
      "1f1b", schedule::GeneratorOptions{}.set_ranks(4).set_microbatches(8));
  const sim::Stats stats = sim::simulate_stats(*source, costs);
  EXPECT_EQ(stats.peak_inflight[0], 4);
  EXPECT_EQ(analytic_peak_chunks(config), 4);
  EXPECT_NEAR(estimate(kShape, c, config).memory_bytes,
              stats.parameter_bytes[0] + stats.peak_activation_bytes[0], 1);
  // Rank 0: two layers and the embedding, 4 + 12 / 4 bytes per parameter.
  const double params = 2 * (12.0 * 1024 * 1024 + 13 * 1024) + (1000 + 512) * 1024.0;
  EXPECT_NEAR(stats.parameter_bytes[0], params * 7, 1);
}

}  // namespace
}  // namespace baton::plan
