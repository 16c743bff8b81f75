// Pipeline::eval runs the forward-only schedule of the IR
// (schedule::forward_only) for every training schedule: the outputs the
// ranks return, put together by micro-batch, equal the model's forward on
// one process, for an evaluation batch split like the training one and for
// one split into fewer micro-batches than the training schedule has (where
// Chimera's pipes alternate). The schedule itself: one F per (stage,
// micro-batch) on the training schedule's rank, stage by stage.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

const auto kTimeout = std::chrono::seconds(60);

class EvalSchedules : public testing::TestWithParam<std::string> {};

TEST_P(EvalSchedules, OutputsEqualTheModelsForwardOnOneProcess) {
  at::set_num_threads(1);
  const std::string name = GetParam();
  torch::NoGradGuard no_grad;
  const torch::Tensor x = test::seeded_batch(7, 12).first;
  const torch::Tensor expected = test::four_linear_mlp()->forward(x);
  for (const int rows : {12, 3}) {  // 8 micro-batches (as trained), then 3
    std::vector<std::map<int, torch::Tensor>> outputs(2);
    std::vector<torch::nn::Sequential> models{test::four_linear_mlp(), test::four_linear_mlp()};
    comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
      // zb-auto searches with the layers' profiled costs: it needs a sample.
      Pipeline pipe(models[comm.rank()], &test::cross_entropy,
                    PipelineOptions()
                        .schedule(name)
                        .microbatches(8)
                        .sample(x.narrow(0, 0, 2))
                        .communicator(comm));
      outputs[comm.rank()] = pipe.eval_microbatches(x.narrow(0, 0, rows), std::min(rows, 8));
    });
    std::map<int, torch::Tensor> all;
    for (const auto& part : outputs) {
      for (const auto& [mb, out] : part)
        EXPECT_TRUE(all.emplace(mb, out).second) << "micro-batch " << mb << " twice";
    }
    ASSERT_EQ(static_cast<int>(all.size()), std::min(rows, 8)) << name << " rows " << rows;
    std::vector<torch::Tensor> parts;
    for (auto& [mb, out] : all) parts.push_back(out);
    EXPECT_TRUE(torch::allclose(torch::cat(parts), expected.narrow(0, 0, rows), 1e-6, 1e-6))
        << name << " rows " << rows;
  }
}

INSTANTIATE_TEST_SUITE_P(All, EvalSchedules, testing::ValuesIn(schedule::schedule_names()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

TEST(ForwardOnlySchedule, OneFPerCellOnTheTrainingRankStageByStage) {
  for (const std::string& name : {std::string("1f1b"), std::string("interleaved"),
                                  std::string("zb-v"), std::string("chimera")}) {
    const schedule::Schedule training = schedule::lower(
        schedule::generate(name, schedule::GeneratorOptions().set_ranks(4).set_microbatches(8)));
    const schedule::Placement trained(training);
    for (const int m : {8, 5, 13}) {
      const schedule::Schedule eval = schedule::forward_only(training, m);
      EXPECT_TRUE(eval.forward_only);
      EXPECT_EQ(eval.action_count(), static_cast<size_t>(training.stages) * m) << name;
      for (int r = 0; r < eval.ranks; ++r) {
        int previous_stage = -1;
        for (const schedule::Action& a : eval.actions[r]) {
          EXPECT_EQ(a.kind, schedule::ActionKind::F);
          EXPECT_EQ(trained.rank_of(a.stage, a.microbatch % 8), r)
              << name << " " << schedule::to_string(a);
          EXPECT_GE(a.stage, previous_stage) << name << " rank " << r;
          previous_stage = a.stage;
        }
      }
      EXPECT_NO_THROW(schedule::lower(eval)) << name << " m=" << m;
    }
  }
}

TEST(ForwardOnlySchedule, TheValidatorRefusesABackwardInIt) {
  schedule::Schedule eval = schedule::forward_only(
      schedule::generate("1f1b", schedule::GeneratorOptions().set_ranks(2).set_microbatches(2)), 2);
  eval.actions[1].push_back({schedule::ActionKind::B, 1, 0});
  try {
    schedule::lower(eval);
    FAIL() << "a forward-only schedule with a B was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a forward-only schedule has none"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace baton
