// pipemare (PipeMare: asynchronous 1F1B with learning-rate warm-up and
// discrepancy correction, runtime/pipemare.h) through the façade, held to a
// single-process replay of its rules written out here: in 1F1B without a
// flush, stage s of p runs micro-batch j's forward after j - tau updates of
// the stage (tau = p - 1 - s), so on W_(j - tau), and its backward after j,
// on W_j - tau v_j with the correction (W_j without), where the velocity is
// v_(k+1) = g v_k + (1 - g)(W_(k+1) - W_k), g = D^(1 / tau); update k scales
// lr by (tau + 1)^-(1 - min(1, k / K)). With both techniques off, pipemare
// must train bit for bit as async.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "tests/pipeline/async_replay.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

using namespace test::async_replay;  // NOLINT: the shared replay and its constants

struct PipelineRun {
  std::vector<Record> ranks;
  std::vector<int> stage_of_layer = std::vector<int>(7, -1);
  std::vector<int> weight_versions;  // per rank, at most over the steps
};

PipelineRun run_pipeline(int pp, const std::string& schedule,
                         const runtime::PipeMareOptions& pipemare = {}) {
  at::set_num_threads(1);
  PipelineRun run;
  run.ranks.resize(pp);
  run.weight_versions.resize(pp);
  std::vector<torch::nn::Sequential> models;
  for (int r = 0; r < pp; ++r) models.push_back(test::four_linear_mlp());
  comm::run_local_group(pp, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    Pipeline pipe(models[r], test::cross_entropy,
                  PipelineOptions()
                      .schedule(schedule)
                      .microbatches(kMicrobatches)
                      .pipemare(pipemare)
                      .communicator(comm));
    for (const auto& [stage, layers] : pipe.stage_layers())
      for (int layer : layers) run.stage_of_layer[layer] = stage;
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
    pipe.set_optimizer(&sgd);
    for (int t = 0; t < kSteps; ++t) {
      auto [x, y] = batch(t);
      run.ranks[r].losses.push_back(pipe.step(x, y));
      run.weight_versions[r] = std::max(run.weight_versions[r], pipe.last_step().weight_versions);
    }
    pipe.flush();
    // The warm-up puts the caller's lr back after each update.
    EXPECT_EQ(sgd.param_groups()[0].options().get_lr(), kLr) << "rank " << r;
    for (auto& [name, p] : pipe.named_parameters())
      run.ranks[r].final_params[name] = p.detach().clone();
  });
  return run;
}

const auto kOff = runtime::PipeMareOptions().warmup_steps(0).correction(false);

class PipeMare : public testing::TestWithParam<int> {};

// The independent check of the plumbing: with T1 and T2 off nothing may
// differ from async, not even rounding.
TEST_P(PipeMare, WithBothTechniquesOffTrainsBitForBitAsAsync) {
  const int pp = GetParam();
  const PipelineRun async = run_pipeline(pp, "async");
  const PipelineRun off = run_pipeline(pp, "pipemare", kOff);
  for (int r = 0; r < pp; ++r) {
    EXPECT_EQ(off.ranks[r].losses, async.ranks[r].losses) << "rank " << r;
    for (const auto& [name, p] : async.ranks[r].final_params)
      EXPECT_TRUE(torch::equal(off.ranks[r].final_params.at(name), p)) << name;
    EXPECT_EQ(off.weight_versions[r], 1) << "rank " << r;
  }
}

// T2 alone: the backwards run on the extrapolated weights. The replays with
// and without the correction differ by more than twice the 1e-5 the
// pipeline is held to, and the corrected one is nearer weight stashing's.
TEST_P(PipeMare, CorrectionRunsEachBackwardOnTheExtrapolatedWeights) {
  const int pp = GetParam();
  const PipelineRun run =
      run_pipeline(pp, "pipemare", runtime::PipeMareOptions().warmup_steps(0).decay(0.5));
  const Record want = replay(run.stage_of_layer, pp, Rules{false, true, 0.5, 0});
  const Record async = replay(run.stage_of_layer, pp, Rules{});
  const Record stashed = replay(run.stage_of_layer, pp, Rules{true});
  EXPECT_GT(distance(want.final_params, async.final_params), 2e-5)
      << "the correction should change the replay";
  EXPECT_LT(distance(want.final_params, stashed.final_params),
            distance(async.final_params, stashed.final_params))
      << "the corrected backwards should be nearer the forward's weights than async's";
  expect_matches(run.ranks, want);
  // The stages with a delay hold the masters and the copy they compute on.
  for (int r = 0; r < pp; ++r)
    EXPECT_EQ(run.weight_versions[r], r < pp - 1 ? 2 : 1) << "rank " << r;
}

// T1 alone, over a warm-up of 2 steps (8 updates) that ends inside the run.
TEST_P(PipeMare, WarmupScalesEachStagesLearningRateByItsDelay) {
  const int pp = GetParam();
  const PipelineRun run =
      run_pipeline(pp, "pipemare", runtime::PipeMareOptions().warmup_steps(2).correction(false));
  const Record want = replay(run.stage_of_layer, pp, Rules{false, false, 0.5, 2 * kMicrobatches});
  EXPECT_GT(distance(want.final_params, replay(run.stage_of_layer, pp, Rules{}).final_params), 1e-3)
      << "the warm-up should change the replay";
  expect_matches(run.ranks, want);
}

// Both, with the defaults' decay and a warm-up of 2 steps.
TEST_P(PipeMare, BothTechniquesTogetherMatchTheReplay) {
  const int pp = GetParam();
  const PipelineRun run = run_pipeline(pp, "pipemare", runtime::PipeMareOptions().warmup_steps(2));
  expect_matches(run.ranks,
                 replay(run.stage_of_layer, pp, Rules{false, true, 0.5, 2 * kMicrobatches}));
}

INSTANTIATE_TEST_SUITE_P(Ranks, PipeMare, testing::Values(2, 3),
                         [](const auto& info) { return "pp" + std::to_string(info.param); });

TEST(PipeMareErrors, BadOptionsAreRefusedWhenThePipelineIsBuilt) {
  at::set_num_threads(1);
  auto message = [](const runtime::PipeMareOptions& o) {
    try {
      Pipeline pipe(test::four_linear_mlp(), test::cross_entropy,
                    PipelineOptions().schedule("pipemare").pp(1).pipemare(o));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(runtime::PipeMareOptions().decay(1.5)).find("decay must be in [0, 1)"),
            std::string::npos);
  EXPECT_NE(message(runtime::PipeMareOptions().warmup_steps(-3)).find("warmup_steps must be"),
            std::string::npos);
}

}  // namespace
}  // namespace baton
