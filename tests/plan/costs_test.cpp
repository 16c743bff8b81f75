// A configuration's costs against figures computed here from the stated
// model: compute at the achieved rate, the tensor-parallel all-reduces and
// which link carries them, the data-parallel all-reduce, and memory.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/plan/costs.h"
#include "baton/plan/schedules.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/sim/simulator.h"
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
  c.memory_gb_per_s = 1000;
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

TEST(PlanCosts, AMeasuredAllReduceRateReplacesTheLinks) {
  Cluster c = cluster();
  Config config;
  config.d = 4;
  const Cluster link_only = c;
  c.allreduce_gbps = 80;  // 10 GB/s
  c.allreduce_latency_us = 20;
  EXPECT_DOUBLE_EQ(gradient_allreduce_seconds(1e9, c, config), allreduce_seconds(1e9, 4, 80, 20));
  EXPECT_DOUBLE_EQ(
      gradient_allreduce_seconds(1e9, link_only, config),
      allreduce_seconds(1e9, 4, link_only.intra_node_gbps, link_only.intra_node_latency_us));
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
  // The element-wise work moves Korthikanti's activation bytes at 1000 GB/s.
  const double elementwise = s * b * h * (10 + 24.0 / 4 + 5.0 * 16 * s / (h * 4)) / 1000e9;
  EXPECT_NEAR(costs.stages[0].forward, layers_per_stage * (layer + elementwise + 2 * allreduce),
              1e-15);
  EXPECT_NEAR(costs.stages[0].input_backward,
              layers_per_stage * (layer + elementwise + 2 * allreduce), 1e-15);
  EXPECT_NEAR(costs.stages[0].weight_backward, layers_per_stage * layer, 1e-15);
  const double logits = 2 * b * s * h * 1000 / 4 / rate;
  EXPECT_NEAR(costs.stages[1].weight_backward, layers_per_stage * layer + logits, 1e-15);
  EXPECT_DOUBLE_EQ(costs.stages[0].boundary_bytes, 2 * b * s * h);
  // t d p = 16 > G: the pipeline crosses nodes.
  EXPECT_DOUBLE_EQ(costs.comm_bytes_per_time, 10e9);
  EXPECT_DOUBLE_EQ(costs.comm_latency, 20e-6);

  config.recompute = true;
  EXPECT_NEAR(stage_costs(kShape, c, config).stages[0].input_backward,
              2 * layers_per_stage * (layer + elementwise + 2 * allreduce), 1e-15);

  // Selective (Korthikanti): I runs the attention core's forward again, 4 b
  // s^2 h FLOPs a layer over t, and a layer keeps s b h (10 + 16 / t) bytes,
  // without the core's 5 a s^2 b / t or the GELU's output, 8 s b h / t.
  config.recompute = false;
  config.selective = true;
  const sim::CostModel selective = stage_costs(kShape, c, config);
  const double core = 4 * b * s * s * h / 4 / rate;
  EXPECT_NEAR(selective.stages[0].input_backward,
              layers_per_stage * (layer + elementwise + 2 * allreduce + core), 1e-15);
  EXPECT_NEAR(selective.stages[0].activation_bytes, layers_per_stage * s * b * h * (10 + 16.0 / 4),
              1);
  EXPECT_NEAR(working_bytes(kShape, config), 5.0 * 16 * s * s * b / 4 + 8.0 * s * b * h / 4, 1);
}

// Bytes per parameter at the peak by ZeRO stage, as baton holds them: the
// fp16 weights and gradients whole during the step, Adam's 12 bytes over d
// from ZeRO-1 on, and under ZeRO-3 the 2-byte weight shard besides.
TEST(PlanCosts, StateBytesPerParameterByZeroStage) {
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(4, 0), 16);
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(4, 1), 4 + 3);
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(4, 2), 4 + 3);
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(4, 3), 4 + 14.0 / 4);
  EXPECT_DOUBLE_EQ(state_bytes_per_parameter(1, 3), 18);
}

TEST(PlanCosts, TensorParallelGroupsWiderThanANodeUseTheSlowLink) {
  const Cluster c = cluster();
  Config in_node, across;
  in_node.t = 4, in_node.d = 4;
  across.t = 8, across.d = 2;
  EXPECT_TRUE(tensor_parallel_in_node(c, in_node));
  EXPECT_FALSE(tensor_parallel_in_node(c, across));
  const double b = 1, s = 512, h = 1024;
  const double elementwise = s * b * h * (10 + 24.0 / 8 + 5.0 * 16 * s / (h * 8)) / 1000e9;
  const double compute = stage_costs(kShape, c, across).stages[0].weight_backward / 8 + elementwise;
  EXPECT_NEAR(stage_costs(kShape, c, across).stages[0].forward / 8 - compute,
              2 * (2.0 * 7 / 8 * (2 * b * s * h) / 10e9 + 20e-6), 1e-12);
}

TEST(PlanCosts, DataParallelAllReduceOfOneStageARankHidesBehindNothing) {
  Cluster c = cluster();
  Config config;
  config.p = 1, config.d = 16;
  const sim::CostModel costs = stage_costs(kShape, c, config);
  // Untied: the embedding and the LM head (V h) both on the one stage.
  const double params =
      8 * (12.0 * 1024 * 1024 + 13 * 1024) + (1000 + 512) * 1024.0 + 1000 * 1024.0;
  const double allreduce = 2.0 * 15 / 16 * 2 * params / 10e9 + 20e-6;  // t d = 16 > G
  EXPECT_NEAR(dp_allreduce_seconds(kShape, c, config), allreduce, 1e-12);
  // baton reduces a stage's buckets after its last backward: the rank's last compute.
  EXPECT_NEAR(dp_exposed_seconds(kShape, c, config, costs), allreduce, 1e-12);
  c.overlap_grad_reduce = false;
  EXPECT_NEAR(dp_exposed_seconds(kShape, c, config, costs), allreduce, 1e-12);
}

// Rank 0's all-reduce at p = 4, m = 8 with one bucket a stage, over a dp link
// of `link_bytes_per_s`: the planner's exposed part, and the simulator's
// running baton's REDUCE_GRAD placement (schedule/grad_reduction.h) on the
// same stage costs.
struct Exposure {
  double allreduce = 0, planned = 0, simulated = 0;
};
Exposure exposure(const std::string& name, const Config& config, double link_bytes_per_s) {
  sim::CostModel costs = stage_costs(kShape, cluster(), config);
  costs.dp = 2;
  costs.dp_link = sim::Link{0, link_bytes_per_s};
  const schedule::Schedule generated =
      schedule::generate(name, schedule::GeneratorOptions{}
                                   .set_ranks(config.p)
                                   .set_microbatches(config.microbatches)
                                   .set_virtual_stages(config.virtual_stages));
  const schedule::Schedule reduced = schedule::add_grad_reductions(
      generated, 2, std::vector<int>(static_cast<size_t>(generated.stages), 1));
  Exposure out;
  for (int s : stages_of_rank(config, 0)) out.allreduce += costs.reduce_grad_time(s, 0);
  out.planned = exposed_seconds(out.allreduce, config, costs);
  out.simulated = sim::simulate(reduced, costs).stats.exposed_reduction[0];
  return out;
}

TEST(PlanCosts, ExposedAllReduceIsWhatTheSimulatorFindsForBatonsPlacement) {
  Config config;
  config.p = 4, config.d = 2, config.microbatch = 1, config.microbatches = 8;
  for (double rate : {1e9, 1e10, 1e11}) {  // slow, medium and fast links (bytes/s)
    SCOPED_TRACE(rate);
    config.virtual_stages = 1;
    const Exposure one = exposure("1f1b", config, rate);
    EXPECT_NEAR(one.planned, one.simulated, 1e-9 + 1e-6 * one.simulated);
    config.virtual_stages = 2;
    const Exposure two = exposure("interleaved", config, rate);
    EXPECT_NEAR(two.planned, two.simulated, 0.05 * two.allreduce) << "all-reduce " << two.allreduce;
    // With two chunks a rank, part of the other chunk's share hides.
    EXPECT_LT(two.planned, two.allreduce);
  }
}

TEST(PlanCosts, EstimatedMemoryOfOneFOneBIsTheSimulatedPeakOnRankZero) {
  const Cluster c = cluster();
  Config config;
  config.p = 4, config.d = 4, config.microbatch = 1, config.microbatches = 8, config.zero = 1;
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

// The fastest slowest stage over every cut (each stage at least one layer
// or none: counts >= 0), by exhaustion.
double best_slowest(int layers, int stages, double extra) {
  if (stages == 1) return layers + extra;
  double best = INFINITY;
  for (int first = 0; first <= layers; ++first)
    best = std::min(best, std::max<double>(first, best_slowest(layers - first, stages - 1, extra)));
  return best;
}

TEST(PlanCosts, AnalyticPeakChunksNeverExceedWhatTheSimulatorCountsOnRankZero) {
  for (const SearchedSchedule& traits : searched_schedules()) {
    for (int p = 1; p <= 12; ++p) {
      for (int m = 1; m <= 40; ++m) {
        for (int v :
             traits.chunks == 0 ? std::vector<int>{2, 3, 5} : std::vector<int>{traits.chunks}) {
          const auto options =
              schedule::GeneratorOptions{}.set_ranks(p).set_microbatches(m).set_virtual_stages(v);
          schedule::Schedule generated;
          try {
            generated = schedule::generate(traits.name, options);
          } catch (const Error&) {
            continue;  // not defined for (p, m, v)
          }
          const auto source = sim::schedule_source(generated);
          const sim::Stats stats =
              sim::simulate_stats(*source, sim::uniform_cost_model(*source, 1, 2, 1));
          Config c;
          c.p = p, c.microbatches = m, c.schedule = traits.name, c.virtual_stages = v;
          EXPECT_LE(analytic_peak_chunks(c), stats.peak_inflight[0])
              << traits.name << " p=" << p << " m=" << m << " v=" << v;
        }
      }
    }
  }
}

TEST(PlanCosts, BalancedCutsGiveTheFirstAndLastStagesFewerLayers) {
  // 30 layers on 4 stages: at most 8 a stage, the 2 spare taken from the ends.
  EXPECT_EQ(balanced_stage_layers(30, 4, 0), (std::vector<int>{7, 8, 8, 7}));
  EXPECT_EQ(balanced_stage_layers(25, 4, 0), (std::vector<int>{6, 6, 7, 6}));
  // Logits worth 1.5 layers: the last stage takes 6 + 1.5 <= 8.
  EXPECT_EQ(balanced_stage_layers(30, 4, 1.5), (std::vector<int>{8, 8, 8, 6}));
  // Logits worth 0.3 layers on 96 / 8: the uniform cut is already the best.
  EXPECT_EQ(balanced_stage_layers(96, 8, 0.3), std::vector<int>(8, 12));
  // Against every cut of up to 12 layers: none has a faster slowest stage.
  for (int layers = 1; layers <= 12; ++layers) {
    for (int stages = 1; stages <= layers; ++stages) {
      for (double extra : {0.0, 0.4, 2.7}) {
        const std::vector<int> cut = balanced_stage_layers(layers, stages, extra);
        int sum = 0;
        double slowest = 0;
        for (int s = 0; s < stages; ++s) {
          sum += cut[s];
          slowest = std::max(slowest, cut[s] + (s == stages - 1 ? extra : 0));
        }
        EXPECT_EQ(sum, layers);
        EXPECT_DOUBLE_EQ(slowest, best_slowest(layers, stages, extra))
            << layers << " layers, " << stages << " stages, extra " << extra;
      }
    }
  }
}

TEST(PlanCosts, UnevenStagesCostTheirOwnLayers) {
  const Cluster c = cluster();
  Config config;
  config.p = 3, config.microbatch = 2, config.microbatches = 3;
  config.stage_layers = {2, 4, 2};
  const sim::CostModel costs = stage_costs(kShape, c, config);
  const double rate = 100e12 * gemm_efficiency(c, kShape, 2, 1);
  const double layer = 24 * 2.0 * 512 * 1024 * 1024 * (1 + 512.0 / (6 * 1024)) / rate;
  EXPECT_NEAR(costs.stages[1].weight_backward, 4 * layer, 1e-15);
  EXPECT_NEAR(costs.stages[0].weight_backward, 2 * layer, 1e-15);
}

TEST(PlanCosts, TiedEmbeddingsExchangeOnceAcrossRanksAndShareOneCopyOnRankZero) {
  const Cluster c = cluster();
  ModelShape tied = kShape;
  tied.tie_embeddings = true;
  Config loop;
  loop.p = 2, loop.d = 2;
  Config v = loop;
  v.schedule = "zb-v", v.virtual_stages = 2;
  const double head = 1000 * 1024.0;  // V h
  // The exchange: V h fp16 gradients between two ranks over the pipeline link
  // (t d p = 4 <= G: in node), 2 (2 - 1) / 2 x bytes / bandwidth + latency.
  EXPECT_NEAR(tied_exchange_seconds(tied, c, loop), 2 * head / 100e9 + 2e-6, 1e-15);
  EXPECT_EQ(tied_exchange_seconds(kShape, c, loop), 0);
  EXPECT_EQ(tied_exchange_seconds(tied, c, v), 0);  // stage 3 is on rank 0
  // Memory: the last stage holds the head (untied) or its copy (tied) on
  // another rank; with the V map, tied, rank 0 holds it once.
  const double state = 16;  // no ZeRO-1
  const sim::CostModel untied_v = stage_costs(kShape, c, v), tied_v = stage_costs(tied, c, v);
  EXPECT_NEAR(untied_v.stages[3].parameter_bytes - tied_v.stages[3].parameter_bytes, head * state,
              1);
  const sim::CostModel untied_loop = stage_costs(kShape, c, loop),
                       tied_loop = stage_costs(tied, c, loop);
  EXPECT_NEAR(untied_loop.stages[1].parameter_bytes, tied_loop.stages[1].parameter_bytes, 1);
}

}  // namespace
}  // namespace baton::plan
