// Forward + backward of 4 Linear(1024, 1024)+ReLU layers on a batch of 256
// split into m micro-batches, 1 thread: torch::nn::Linear against
// baton::nn::Linear (cached W^T in the forward, weight gradients accumulated
// in place). The gap is the cost of micro-batching a pipeline on CPU.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "baton/nn/linear.h"

namespace {

template <typename LinearT>
void BM_FourLinearsForwardBackward(benchmark::State& state) {
  at::set_num_threads(1);
  const int microbatches = static_cast<int>(state.range(0));
  torch::nn::Sequential seq;
  for (int i = 0; i < 4; ++i) {
    seq->push_back(LinearT(1024, 1024));
    seq->push_back(torch::nn::ReLU());
  }
  const torch::Tensor x = torch::randn({256, 1024});
  for (auto _ : state) {
    for (const auto& chunk : x.tensor_split(microbatches, 0)) seq->forward(chunk).sum().backward();
  }
}

}  // namespace

BENCHMARK_TEMPLATE(BM_FourLinearsForwardBackward, torch::nn::Linear)
    ->Arg(1)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(BM_FourLinearsForwardBackward, baton::nn::Linear)
    ->Arg(1)
    ->Arg(4)
    ->Arg(8)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
