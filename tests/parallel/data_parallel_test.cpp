// Data parallelism through the façade: dp replicas of a pipeline (ranks as
// threads) take the same steps as one process on the whole mini-batch, for
// several schedules and gradient bucket sizes; bad grids and batches are
// refused naming the values.
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <tuple>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/comm/rank_layout.h"
#include "baton/partition/balance.h"
#include "baton/runtime/executor.h"
#include "baton/runtime/stage.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/lower.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

using testing::HasSubstr;

constexpr int kSteps = 3;
constexpr int kBatch = 16;
constexpr double kLr = 0.1;
const auto kTimeout = std::chrono::seconds(60);

// Parameters in bytes (fp32): 512 + 64, 1024 + 64, 1024 + 64, 256 + 16.
torch::nn::Sequential make_sequential() {
  return test::four_linear_mlp();
}

const auto loss_fn = &test::cross_entropy;
using test::relative;

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  return test::seeded_batch(200 + step, kBatch);
}

struct TrainingRun : test::TrainingRun {
  int reductions = 0;  // REDUCE_GRAD actions of this rank's schedule
};

// The reference: the whole mini-batch on one process, plain LibTorch.
test::TrainingRun train_one_process() {
  return test::train_one_process(make_sequential(), kSteps, kLr, batch);
}

struct Grid {
  int dp, pp;
  std::string schedule;
  double bucket_mb;
  int microbatches;
};

void PrintTo(const Grid& g, std::ostream* os) {
  *os << "dp=" << g.dp << " pp=" << g.pp << " " << g.schedule << " m=" << g.microbatches
      << " bucket_mb=" << g.bucket_mb;
}

std::vector<TrainingRun> train_grid(const Grid& g) {
  const int world = g.dp * g.pp;
  std::vector<torch::nn::Sequential> models;
  for (int r = 0; r < world; ++r) models.push_back(make_sequential());
  std::vector<TrainingRun> runs(world);
  comm::run_local_group(world, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    Pipeline pipe(models[r], loss_fn,
                  PipelineOptions()
                      .schedule(g.schedule)
                      .microbatches(g.microbatches)
                      .dp(g.dp)
                      .pp(g.pp)
                      .bucket_mb(g.bucket_mb)
                      .communicator(comm));
    for (const auto& a : pipe.schedule().actions[r / g.dp]) {
      runs[r].reductions += a.kind == schedule::ActionKind::REDUCE_GRAD;
    }
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = batch(step);
      sgd.zero_grad();
      runs[r].losses.push_back(pipe.step(x, y));
      sgd.step();
    }
    for (auto& [name, value] : pipe.named_parameters())
      runs[r].parameters[name] = value.detach().clone();
  });
  return runs;
}

class DataParallel : public testing::TestWithParam<Grid> {};

TEST_P(DataParallel, TakesTheSameStepsAsOneProcessOnTheWholeBatch) {
  at::set_num_threads(1);
  const Grid g = GetParam();
  const test::TrainingRun reference = train_one_process();
  const std::vector<TrainingRun> runs = train_grid(g);
  std::map<std::string, int> seen;
  for (size_t r = 0; r < runs.size(); ++r) {
    EXPECT_GT(runs[r].reductions, 0) << "rank " << r << " reduces nothing";
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << "rank " << r << " step " << step;
    }
    for (const auto& [name, value] : runs[r].parameters) {
      ++seen[name];
      ASSERT_TRUE(reference.parameters.count(name)) << name;
      EXPECT_LT(relative(value, reference.parameters.at(name)), 1e-5) << name << " on rank " << r;
    }
  }
  // Every parameter is held by each of the dp replicas.
  EXPECT_EQ(seen.size(), reference.parameters.size());
  for (const auto& [name, count] : seen) EXPECT_EQ(count, g.dp) << name;
}

// bucket_mb 0.0007 (734 bytes): a 1024-byte weight is larger than a bucket
// (a bucket of its own) and a bias sits alone in one; 0.00001 (10 bytes):
// every parameter alone (see DataParallelBuckets).
INSTANTIATE_TEST_SUITE_P(Grids, DataParallel,
                         testing::Values(Grid{2, 1, "1f1b", 25, 2}, Grid{2, 2, "1f1b", 25, 2},
                                         Grid{2, 2, "zb-h1", 25, 4},
                                         Grid{2, 2, "interleaved", 25, 4},
                                         Grid{2, 2, "1f1b", 0.0007, 2},
                                         Grid{2, 1, "gpipe", 0.00001, 4}),
                         [](const testing::TestParamInfo<Grid>& info) {
                           std::string name = "dp" + std::to_string(info.param.dp) + "_pp" +
                                              std::to_string(info.param.pp) + "_" +
                                              info.param.schedule +
                                              (info.param.bucket_mb < 1 ? "_small_buckets" : "");
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return name;
                         });

TEST(DataParallelBuckets, SmallBucketsMakeOneReductionPerBucketOfEachStage) {
  // pp = 1, dp = 2: one stage of 8 parameters.
  const std::vector<TrainingRun> every_parameter = train_grid(Grid{2, 1, "1f1b", 0.00001, 2});
  EXPECT_EQ(every_parameter[0].reductions, 8);
  // 734-byte buckets, in backward order: [16, 256, 64], [1024] (larger than a
  // bucket), [64] (alone: the next weight does not fit), [1024], [64, 512].
  const std::vector<TrainingRun> mixed = train_grid(Grid{2, 1, "1f1b", 0.0007, 2});
  EXPECT_EQ(mixed[0].reductions, 5);
  const std::vector<TrainingRun> one = train_grid(Grid{2, 1, "1f1b", 25, 2});
  EXPECT_EQ(one[0].reductions, 1);
}

TEST(DataParallelErrors, TheExecutorRefusesAScheduleWithOtherBucketsThanItsParameters) {
  // One stage of 8 parameters in 25 MiB: one bucket; the schedule says two.
  const nn::ModelSpec model = nn::from_sequential(make_sequential());
  const schedule::Schedule two_buckets = schedule::add_grad_reductions(
      schedule::lower(schedule::generate(
          "1f1b", schedule::GeneratorOptions{}.set_ranks(1).set_microbatches(2))),
      2, {2});
  std::vector<std::string> messages(2);
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    // dp = 2 replicas of a one-rank pipeline.
    const comm::RankLayout layout =
        comm::make_rank_layout(comm::borrow(comm), topology::Topology(2, 1, 1));
    try {
      runtime::Executor executor(
          two_buckets, layout,
          runtime::build_stages(model, partition::uniform(model.num_layers(), 1), {0}, 1), loss_fn);
    } catch (const Error& e) {
      messages[comm.rank()] = e.what();
    }
  });
  for (const auto& m : messages) {
    EXPECT_THAT(m, HasSubstr("stage 0 has 1 gradient bucket(s) of 25 MiB but schedule \"1f1b\" "
                             "reduces it in 2 REDUCE_GRAD action(s)"));
  }
}

TEST(DataParallelErrors, AGridThatIsNotTheWorldIsRefusedWithTheSizes) {
  std::vector<std::string> messages(4);
  comm::run_local_group(4, kTimeout, [&](comm::Communicator& comm) {
    try {
      Pipeline pipe(make_sequential(), loss_fn, PipelineOptions().dp(3).pp(1).communicator(comm));
    } catch (const Error& e) {
      messages[comm.rank()] = e.what();
    }
  });
  for (const auto& m : messages)
    EXPECT_THAT(m, HasSubstr("dp=3 x pp=1 is 3 ranks but the world has 4"));
}

TEST(DataParallelErrors, ABatchThatDoesNotSplitOverTheReplicasIsRefused) {
  std::vector<std::string> messages(2);
  std::vector<torch::nn::Sequential> models{make_sequential(), make_sequential()};
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    Pipeline pipe(models[comm.rank()], loss_fn,
                  PipelineOptions().dp(2).microbatches(2).communicator(comm));
    try {
      pipe.step(torch::randn({7, 8}), torch::zeros({7}, torch::kLong));
    } catch (const Error& e) {
      messages[comm.rank()] = e.what();
    }
  });
  for (const auto& m : messages) {
    EXPECT_THAT(m,
                HasSubstr("the batch of 7 samples does not split into dp=2 equal replica batches"));
  }
}

}  // namespace
}  // namespace baton
