// ZeRO-1 (PipelineOptions::zero(1)): the optimizer state sharded over the dp
// replicas takes bitwise the same steps as zero(0), for SGD with momentum and
// for AdamW, on dp-only and dp x pp grids; each replica's optimizer holds
// about 1/dp of the state (measured), the replicas' shares add up to the
// whole, and every replica ends with the same parameters. (Checkpoints of a
// sharded optimizer: checkpoint_parallel_test.cpp; ZeRO-2 and 3:
// zero_sharding_test.cpp.)
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/train/optimizer.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

constexpr int kSteps = 3;
const auto kTimeout = std::chrono::seconds(60);

torch::nn::Sequential make_sequential() {
  return test::four_linear_mlp();
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::string& kind,
                                                        const std::vector<torch::Tensor>& params) {
  if (kind == "sgd") {
    return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  }
  return std::make_unique<torch::optim::AdamW>(params,
                                               torch::optim::AdamWOptions(0.01).weight_decay(0.1));
}

struct ZeroRun {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> parameters;
  double state_bytes = 0;
  size_t stepped = 0;  // parameters() given to the optimizer
};

std::vector<ZeroRun> train(int dp, int pp, int zero, const std::string& optimizer) {
  const int world = dp * pp;
  std::vector<torch::nn::Sequential> models;
  for (int r = 0; r < world; ++r) models.push_back(make_sequential());
  std::vector<ZeroRun> runs(world);
  comm::run_local_group(world, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    Pipeline pipe(models[r], &test::cross_entropy,
                  PipelineOptions().microbatches(2).dp(dp).pp(pp).zero(zero).communicator(comm));
    auto opt = make_optimizer(optimizer, pipe.parameters());
    runs[r].stepped = pipe.parameters().size();
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = test::seeded_batch(300 + step, 16);
      opt->zero_grad();
      runs[r].losses.push_back(pipe.step(x, y));
      opt->step();
    }
    runs[r].state_bytes = train::optimizer_state_bytes(*opt);
    // eval() brings the owners' last updates to every replica first.
    pipe.eval(test::seeded_batch(999, 4).first);
    for (auto& [name, value] : pipe.named_parameters())
      runs[r].parameters[name] = value.detach().clone();
  });
  return runs;
}

struct Case {
  int dp, pp;
  std::string optimizer;
};

class Zero1 : public testing::TestWithParam<Case> {};

TEST_P(Zero1, TakesBitwiseTheStepsOfZero0WithAboutOneDpthOfTheState) {
  at::set_num_threads(1);
  const Case c = GetParam();
  const std::vector<ZeroRun> plain = train(c.dp, c.pp, 0, c.optimizer);
  const std::vector<ZeroRun> sharded = train(c.dp, c.pp, 1, c.optimizer);
  for (int r = 0; r < c.dp * c.pp; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_EQ(sharded[r].losses[step], plain[r].losses[step]) << "rank " << r << " step " << step;
    }
    ASSERT_EQ(sharded[r].parameters.size(), plain[r].parameters.size());
    for (const auto& [name, value] : plain[r].parameters) {
      EXPECT_TRUE(torch::equal(sharded[r].parameters.at(name), value)) << name << " on rank " << r;
    }
  }
  // Per pipeline rank: its dp replicas' optimizer states add up to zero-0's
  // (which every replica holds whole), each holds a share of it, and the
  // split is balanced to within one parameter's state.
  for (int stage_rank = 0; stage_rank < c.pp; ++stage_rank) {
    double sum = 0, largest = 0;
    for (int d = 0; d < c.dp; ++d) {
      const ZeroRun& run = sharded[stage_rank * c.dp + d];
      EXPECT_GT(run.stepped, 0u);
      EXPECT_LT(run.state_bytes, plain[stage_rank * c.dp + d].state_bytes) << "replica " << d;
      sum += run.state_bytes;
      largest = std::max(largest, run.state_bytes);
    }
    const double whole = plain[stage_rank * c.dp].state_bytes;
    EXPECT_DOUBLE_EQ(sum, whole) << "pipeline rank " << stage_rank;
    // A 16x16 weight's state is the largest single share: 1024 bytes per moment.
    const double moments = c.optimizer == "sgd" ? 1 : 2;
    EXPECT_LE(largest, whole / c.dp + moments * 1024) << "pipeline rank " << stage_rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Grids, Zero1,
                         testing::Values(Case{2, 1, "sgd"}, Case{2, 1, "adamw"}, Case{2, 2, "sgd"},
                                         Case{2, 2, "adamw"}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return "dp" + std::to_string(info.param.dp) + "_pp" +
                                  std::to_string(info.param.pp) + "_" + info.param.optimizer;
                         });

TEST(Zero1, WithOneReplicaChangesNothing) {
  at::set_num_threads(1);
  const std::vector<ZeroRun> plain = train(1, 2, 0, "adamw");
  const std::vector<ZeroRun> sharded = train(1, 2, 1, "adamw");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sharded[r].stepped, plain[r].stepped);
    EXPECT_EQ(sharded[r].state_bytes, plain[r].state_bytes);
    for (const auto& [name, value] : plain[r].parameters)
      EXPECT_TRUE(torch::equal(sharded[r].parameters.at(name), value));
  }
}

}  // namespace
}  // namespace baton
