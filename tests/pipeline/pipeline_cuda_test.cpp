// baton::Pipeline on CUDA devices. Tests whose names end in _CUDA need a GPU
// (two for NCCL) and skip themselves without one; the CPU-only machine that
// runs CI compiles them against the CUDA wheel and runs the refusal test.
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <thread>

#include "baton/baton.h"
#include "baton/comm/launcher.h"
#include "baton/comm/local_group.h"
#include "baton/comm/nccl.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

using testing::HasSubstr;

constexpr int kSteps = 3;
constexpr int kBatch = 12;
constexpr double kLr = 0.1;
const auto kTimeout = std::chrono::seconds(60);

torch::nn::Sequential make_sequential() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(),
                               torch::nn::Linear(16, 16), torch::nn::Tanh(),
                               torch::nn::Linear(16, 4));
}

const auto loss_fn = &test::cross_entropy;

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  return test::seeded_batch(100 + step, kBatch);
}

// The reference: the same Sequential on the CPU in one process, no pipeline.
std::vector<double> cpu_losses() {
  return test::train_one_process(make_sequential(), kSteps, kLr, batch).losses;
}

// Trains through `pipe` on CPU batches (the Pipeline moves them to its device).
std::vector<double> train(Pipeline& pipe) {
  torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
  std::vector<double> losses;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    sgd.zero_grad();
    losses.push_back(pipe.step(x, y));
    sgd.step();
  }
  return losses;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  // GPU kernels sum in other orders than the CPU's: fp32 round-off, not 1e-5.
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-4 * std::abs(want[i])) << "step " << i;
}

TEST(PipelineCuda, RefusesCudaWhenNoDeviceIsVisible) {
  if (torch::cuda::is_available())
    GTEST_SKIP() << "a CUDA device is visible; this checks the error without one";
  EXPECT_THAT([] { Pipeline(make_sequential(), loss_fn, PipelineOptions().device(torch::kCUDA)); },
              testing::ThrowsMessage<Error>(
                  HasSubstr("[comm.device] device cuda: this process sees no CUDA device")));
}

TEST(PipelineCuda, RefusesADeviceTypeOtherThanCpuOrCuda) {
  EXPECT_THAT(
      [] { Pipeline(make_sequential(), loss_fn, PipelineOptions().device(torch::Device("meta"))); },
      testing::ThrowsMessage<Error>(
          HasSubstr("[comm.device] device meta is not supported; use cpu or cuda")));
}

TEST(PipelineCuda, OneProcessOnTheGpuTakesTheStepsOfTheCpu_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Pipeline pipe(make_sequential(), loss_fn,
                PipelineOptions().schedule("1f1b").microbatches(4).device(torch::Device("cuda:0")));
  for (const auto& p : pipe.parameters()) EXPECT_TRUE(p.is_cuda());
  expect_close(train(pipe), cpu_losses());
  EXPECT_TRUE(pipe.eval(batch(0).first).is_cuda());
}

// Two ranks as threads on one GPU over a CPU communicator: received tensors
// arrive on the host and the executor moves them to the device.
TEST(PipelineCuda, TwoRanksOnTheGpuOverACpuCommunicatorTakeTheStepsOfTheCpu_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  at::set_num_threads(1);
  const std::vector<double> reference = cpu_losses();
  std::vector<torch::nn::Sequential> models{make_sequential(), make_sequential()};
  std::vector<std::vector<double>> losses(2);
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    Pipeline pipe(models[comm.rank()], loss_fn,
                  PipelineOptions().schedule("zb-h1").microbatches(4).communicator(comm).device(
                      torch::Device("cuda:0")));
    losses[comm.rank()] = train(pipe);
  });
  for (int r = 0; r < 2; ++r) expect_close(losses[r], reference);
}

// Two ranks as threads, each on its own GPU, talking over NCCL.
TEST(PipelineCuda, TwoRanksOnTwoGpusOverNcclTakeTheStepsOfTheCpu_CUDA) {
  if (torch::cuda::device_count() < 2) GTEST_SKIP() << "needs two CUDA devices";
  const std::vector<double> reference = cpu_losses();
  std::vector<torch::nn::Sequential> models{make_sequential(), make_sequential()};
  std::vector<std::vector<double>> losses(2);
  const int port = comm::find_free_port();
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      comm::Communicator nccl = comm::connect_nccl(
          comm::ConnectOptions().set_rank(r).set_world_size(2).set_master_port(port).set_timeout(
              kTimeout),
          r);
      EXPECT_EQ(nccl.transport_name(1 - r), "nccl");
      Pipeline pipe(models[r], loss_fn,
                    PipelineOptions().schedule("1f1b").microbatches(4).communicator(nccl).device(
                        torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(r))));
      losses[r] = train(pipe);
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < 2; ++r) expect_close(losses[r], reference);
}

}  // namespace
}  // namespace baton
