// plan_pipeline (pipeline/pipeline_plan.h): the one planning function that
// Pipeline::build and `baton train`'s launcher both call. Checked against
// independent sources: the generator's stage count, balance()'s own cuts,
// the model's tied layers, and each caller's wording of one rule.
#include "baton/pipeline/pipeline_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/nn/models.h"
#include "baton/partition/balance.h"
#include "baton/schedule/generator.h"

namespace baton {
namespace {

using testing::HasSubstr;

nn::ModelSpec gpt(int layers, bool tied = false) {
  return nn::make_model(
      "gpt",
      nn::ModelOptions().layers(layers).hidden(16).heads(2).context(4).vocab(32).tie_embeddings(
          tied));
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The schedule's stage count is the generator's, and the cut is balance()'s
// for that count.
TEST(PipelinePlan, TheStagesAreTheGeneratorsAndTheCutIsTheBalances) {
  const nn::ModelSpec model = gpt(6);  // embedding + 6 blocks + head: 8 layers
  for (const char* name : {"1f1b", "interleaved", "zb-v", "gpipe"}) {
    const PipelineOptions o = PipelineOptions().schedule(name).microbatches(4);
    const PipelinePlan plan = plan_pipeline(o, model, topology::Topology(1, 2, 1));
    const schedule::Schedule generated =
        schedule::generate(name, schedule::GeneratorOptions{}.set_ranks(2).set_microbatches(4));
    EXPECT_EQ(plan.schedule.stages, generated.stages) << name;
    const partition::Partition uniform = partition::balance(
        "uniform", std::vector<partition::LayerCost>(model.num_layers()), generated.stages);
    for (int s = 0; s < generated.stages; ++s) {
      EXPECT_EQ(plan.partition.first_layer(s), uniform.first_layer(s)) << name << " stage " << s;
      EXPECT_EQ(plan.partition.end_layer(s), uniform.end_layer(s)) << name << " stage " << s;
    }
  }
}

// Costs are asked for only where the plan reads them, once, saying why;
// without them a cut by costs is uniform's, with them the balance's.
TEST(PipelinePlan, CostsAreMeasuredOnlyWhereTheCutReadsThem) {
  const nn::ModelSpec model = gpt(6);
  const int layers = model.num_layers();
  std::vector<std::string> asked;
  // The last layer costs as much as all the others: a time balance gives it a stage alone.
  const LayerCostsFn costs = [&](const std::string& why) {
    asked.push_back(why);
    std::vector<partition::LayerCost> c(layers);
    for (int l = 0; l < layers; ++l) c[l].forward_time = c[l].backward_time = 1;
    c[layers - 1].forward_time = c[layers - 1].backward_time = layers - 1;
    return c;
  };
  const topology::Topology grid(1, 2, 1);
  plan_pipeline(PipelineOptions().microbatches(4), model, grid, costs);
  EXPECT_TRUE(asked.empty());
  const PipelineOptions by_time = PipelineOptions().microbatches(4).balance("time");
  const PipelinePlan measured = plan_pipeline(by_time, model, grid, costs);
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_THAT(asked[0], HasSubstr("balance \"time\" cuts by"));
  EXPECT_EQ(measured.partition.first_layer(1), layers - 1);
  const PipelinePlan stand_in = plan_pipeline(by_time, model, grid);
  EXPECT_EQ(stand_in.partition.first_layer(1), layers / 2);
}

// The reductions name the stages of each tied copy: gpt's embedding (layer
// 0) and head (the last layer) under pp 2.
TEST(PipelinePlan, TheReductionsNameTheTiedCopiesStages) {
  const nn::ModelSpec model = gpt(2, /*tied=*/true);
  ASSERT_EQ(model.tied.size(), 1u);
  const PipelinePlan plan = plan_pipeline(PipelineOptions().microbatches(2).dp(2).zero(1), model,
                                          topology::Topology(2, 2, 1));
  ASSERT_EQ(plan.reductions.tied.size(), 1u);
  EXPECT_EQ(plan.reductions.tied[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(plan.reductions.dp, 2);
  EXPECT_EQ(plan.reductions.zero, 1);
}

// One rule, worded for each caller: the library names options, the command
// line flags.
TEST(PipelinePlan, EachCallerReadsARuleInItsOwnWords) {
  const nn::ModelSpec model = gpt(2);
  const PipelineOptions o = PipelineOptions().schedule("2bw").microbatches(4);
  const topology::Topology dp2(2, 2, 1);
  EXPECT_THAT(error_of([&] { plan_pipeline(o, model, dp2); }),
              HasSubstr("[pipeline] schedule 2bw has no flush between steps and runs with dp=1 "
                        "and tp=1 only, got dp=2 tp=1"));
  EXPECT_THAT(error_of([&] { plan_pipeline(o, model, dp2, {}, PlanWording::command_line()); }),
              HasSubstr("[train.config] --schedule 2bw has no flush between steps and runs with "
                        "--dp 1 --tp 1 only, got dp=2 tp=1"));
  const nn::ModelSpec tied = gpt(2, /*tied=*/true);
  EXPECT_THAT(error_of([&] { plan_pipeline(o, tied, topology::Topology(1, 2, 1)); }),
              HasSubstr("has no flush between steps and cannot train tied weights"));
  // More stages than layers: interleaved at pp 2 makes 4 stages.
  const nn::ModelSpec small = gpt(1);  // 3 layers
  const PipelineOptions interleaved = PipelineOptions().schedule("interleaved").microbatches(4);
  EXPECT_THAT(error_of([&] { plan_pipeline(interleaved, small, topology::Topology(1, 2, 1)); }),
              HasSubstr("[pipeline] schedule interleaved with pp=2 makes 4 stages but model "
                        "\"gpt\" has only 3 layers"));
  EXPECT_THAT(error_of([&] {
                plan_pipeline(interleaved, small, topology::Topology(1, 2, 1), {},
                              PlanWording::command_line());
              }),
              HasSubstr("(raise --layers or lower --pp/--virtual)"));
}

}  // namespace
}  // namespace baton
