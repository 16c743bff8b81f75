// Steps overlap (issue 10): Pipeline::step() returns once this rank's own part
// of the step is done, not when the slowest rank's is, and still returns the
// mini-batch loss on every rank. PipelineOptions::step_barrier restores the
// blocking all-reduce. A schedule file runs like the generator it came from.
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/schedule/text_format.h"

namespace baton {
namespace {

using testing::HasSubstr;
using Clock = std::chrono::steady_clock;

constexpr int kSteps = 3;
constexpr int kMicrobatches = 4;
constexpr auto kSleep = std::chrono::milliseconds(400);
const auto kTimeout = std::chrono::seconds(30);

// The identity, whose backward sleeps on every `period`-th call (with 1F1B
// on stage 0: the step's last backward) and records when it woke.
struct SlowBackwardImpl : torch::nn::Module {
  SlowBackwardImpl(int period, std::vector<Clock::time_point>* woke) : period(period), woke(woke) {}
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = x * 1.0;
    if (y.requires_grad()) {
      y.register_hook([this](const torch::Tensor& grad) {
        if (++calls % period == 0) {
          std::this_thread::sleep_for(kSleep);
          woke->push_back(Clock::now());
        }
        return grad;
      });
    }
    return y;
  }
  int period;
  int calls = 0;
  std::vector<Clock::time_point>* woke;
};
TORCH_MODULE(SlowBackward);

// Six layers, cut 3 + 3: the slow backward sits on stage 0 (rank 0).
torch::nn::Sequential make_model(std::vector<Clock::time_point>* woke) {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(8, 16), SlowBackward(kMicrobatches, woke),
                               torch::nn::ReLU(), torch::nn::Linear(16, 16), torch::nn::Tanh(),
                               torch::nn::Linear(16, 4));
}

torch::Tensor loss_fn(const torch::Tensor& output, const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(output, target);
}

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(100 + step);
  return {torch::randn({12, 8}, gen), torch::randint(0, 4, {12}, gen, torch::kLong)};
}

struct TwoRankRun {
  std::vector<double> losses[2];
  std::vector<Clock::time_point> returned[2];  // when each rank's step() returned
  std::vector<Clock::time_point> woke;         // when rank 0's last backward of each step ended
};

TwoRankRun train_two_ranks(bool step_barrier) {
  at::set_num_threads(1);
  TwoRankRun run;
  std::vector<Clock::time_point> unused;
  std::vector<torch::nn::Sequential> models{make_model(&run.woke), make_model(&unused)};
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    Pipeline pipe(models[r], loss_fn,
                  PipelineOptions()
                      .schedule("1f1b")
                      .microbatches(kMicrobatches)
                      .step_barrier(step_barrier)
                      .communicator(comm));
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(0.1));
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = batch(step);
      sgd.zero_grad();
      run.losses[r].push_back(pipe.step(x, y));
      run.returned[r].push_back(Clock::now());
      sgd.step();
    }
  });
  return run;
}

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

TEST(OverlappingSteps, ARankEndsItsStepWhileASlowerRankStillRunsItsPart) {
  const TwoRankRun run = train_two_ranks(/*step_barrier=*/false);
  ASSERT_EQ(run.woke.size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    // Rank 1's part of 1F1B ends with the last micro-batch's backward, before
    // rank 0's (which sleeps 400 ms): rank 1 returns while rank 0 sleeps.
    EXPECT_LT(ms(run.returned[1][step] - run.woke[step]), -ms(kSleep) / 2) << "step " << step;
    EXPECT_EQ(run.losses[0][step], run.losses[1][step]) << "step " << step;
  }
}

TEST(OverlappingSteps, WithAStepBarrierEveryRankWaitsForTheSlowest) {
  const TwoRankRun run = train_two_ranks(/*step_barrier=*/true);
  ASSERT_EQ(run.woke.size(), static_cast<size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_GE(ms(run.returned[1][step] - run.woke[step]), 0) << "step " << step;
    EXPECT_EQ(run.losses[0][step], run.losses[1][step]) << "step " << step;
  }
}

TEST(OverlappingSteps, ReturnsTheSameLossesAsTheBlockingAllReduce) {
  const TwoRankRun overlapped = train_two_ranks(false), blocking = train_two_ranks(true);
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_EQ(overlapped.losses[0][step], blocking.losses[0][step]) << "step " << step;
  }
}

std::string write_schedule(const std::string& name, const schedule::Schedule& s) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << schedule::format_schedule(s);
  return path;
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no baton::Error)";
}

PipelineOptions alone() {
  return PipelineOptions().rank_env(comm::RankEnv{});
}

TEST(ScheduleFile, RefusesAFileWhoseRanksDifferFromPp) {
  const std::string path = write_schedule(
      "three_ranks.txt",
      schedule::generate("1f1b", schedule::GeneratorOptions{}.set_ranks(3).set_microbatches(4)));
  std::vector<Clock::time_point> unused;
  EXPECT_THAT(
      error_of([&] { Pipeline(make_model(&unused), loss_fn, alone().schedule_file(path)); }),
      HasSubstr("has 3 ranks but pp=1"));
}

TEST(ScheduleFile, RefusesMicrobatchesOtherThanTheFiles) {
  const std::string path = write_schedule(
      "one_rank.txt",
      schedule::generate("gpipe", schedule::GeneratorOptions{}.set_ranks(1).set_microbatches(3)));
  std::vector<Clock::time_point> unused;
  EXPECT_THAT(error_of([&] {
                Pipeline(make_model(&unused), loss_fn, alone().schedule_file(path).microbatches(4));
              }),
              HasSubstr("runs 3 micro-batches but microbatches is 4"));
}

TEST(ScheduleFile, AFileRunsLikeTheGeneratorItCameFrom) {
  const std::string path = write_schedule(
      "gpipe.txt",
      schedule::generate("gpipe", schedule::GeneratorOptions{}.set_ranks(1).set_microbatches(4)));
  std::vector<Clock::time_point> unused;
  Pipeline from_file(make_model(&unused), loss_fn, alone().schedule_file(path));
  Pipeline generated(make_model(&unused), loss_fn, alone().schedule("gpipe"));
  auto [x, y] = batch(0);
  EXPECT_EQ(from_file.step(x, y), generated.step(x, y));
  EXPECT_EQ(from_file.schedule().actions, generated.schedule().actions);
}

}  // namespace
}  // namespace baton
