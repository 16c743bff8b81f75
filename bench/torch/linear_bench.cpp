// Forward + backward of 4 Linear(w, w)+ReLU layers on a batch of 256 split
// into m micro-batches, 1 thread: torch::nn::Linear against baton::nn::Linear
// (its own autograd node; weight gradients accumulated in place). At w = 1024
// the gap is the cost of micro-batching a pipeline on CPU; at w = 16, m = 32
// (bench/under_load.py's overhead-bound workload) it is the per-call cost of
// the layer, and the forward alone is timed too.
// Run with --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
// on this kind of host, whose speed drifts within minutes.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "baton/nn/linear.h"

namespace {

template <typename LinearT>
torch::nn::Sequential four_layers(int64_t width) {
  torch::nn::Sequential seq;
  for (int i = 0; i < 4; ++i) {
    seq->push_back(LinearT(width, width));
    seq->push_back(torch::nn::ReLU());
  }
  return seq;
}

// Times `pass` over the batch's m micro-batches of width w (state's two
// arguments), one thread.
template <typename LinearT, typename Pass>
void time_micro_batches(benchmark::State& state, Pass pass) {
  at::set_num_threads(1);
  const int microbatches = static_cast<int>(state.range(0));
  torch::nn::Sequential seq = four_layers<LinearT>(state.range(1));
  const torch::Tensor x = torch::randn({256, state.range(1)});
  for (auto _ : state) {
    for (const auto& chunk : x.tensor_split(microbatches, 0)) pass(seq, chunk);
  }
}

template <typename LinearT>
void BM_FourLinearsForwardBackward(benchmark::State& state) {
  time_micro_batches<LinearT>(state, [](torch::nn::Sequential& seq, const torch::Tensor& chunk) {
    seq->forward(chunk).sum().backward();
  });
}

template <typename LinearT>
void BM_FourLinearsForward(benchmark::State& state) {
  time_micro_batches<LinearT>(state, [](torch::nn::Sequential& seq, const torch::Tensor& chunk) {
    benchmark::DoNotOptimize(seq->forward(chunk));
  });
}

void shapes(benchmark::internal::Benchmark* b) {
  for (const int m : {1, 4, 8, 16}) b->Args({m, 1024});
  b->Args({32, 16});
  b->ArgNames({"m", "w"})->Unit(benchmark::kMillisecond);
}

void narrow(benchmark::internal::Benchmark* b) {
  b->Args({32, 16})->ArgNames({"m", "w"})->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK_TEMPLATE(BM_FourLinearsForwardBackward, torch::nn::Linear)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_FourLinearsForwardBackward, baton::nn::Linear)->Apply(shapes);
BENCHMARK_TEMPLATE(BM_FourLinearsForward, torch::nn::Linear)->Apply(narrow);
BENCHMARK_TEMPLATE(BM_FourLinearsForward, baton::nn::Linear)->Apply(narrow);
BENCHMARK_MAIN();
