// How fast the simulator runs a large schedule: p = 64 ranks, m = 1024
// micro-batches, including lowering and validation. Figures in bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/validate.h"
#include "baton/sim/simulator.h"

namespace {

baton::schedule::Schedule make(const std::string& name, int p, int m) {
  return baton::schedule::lower(baton::schedule::generate(
      name, baton::schedule::GeneratorOptions{}.set_ranks(p).set_microbatches(m)));
}

void BM_Simulate(benchmark::State& state, const std::string& name) {
  const auto s = make(name, 64, 1024);
  const auto costs = baton::sim::uniform_cost_model(s, 1, 2, 1, 0.1);
  for (auto _ : state) {
    auto result = baton::sim::simulate(s, costs);
    benchmark::DoNotOptimize(result.stats.makespan);
  }
  state.counters["actions"] = static_cast<double>(s.action_count());
  state.counters["actions_per_s"] = benchmark::Counter(
      static_cast<double>(s.action_count()) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_Validate(benchmark::State& state, const std::string& name) {
  const auto s = make(name, 64, 1024);
  for (auto _ : state) baton::schedule::validate(s);
}

void BM_GenerateAndLower(benchmark::State& state, const std::string& name) {
  for (auto _ : state) benchmark::DoNotOptimize(make(name, 64, 1024).action_count());
}

}  // namespace

BENCHMARK_CAPTURE(BM_Simulate, 1f1b, std::string("1f1b"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, zb_h1, std::string("zb-h1"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, interleaved, std::string("interleaved"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Validate, 1f1b, std::string("1f1b"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateAndLower, 1f1b, std::string("1f1b"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateAndLower, zb_h1, std::string("zb-h1"))->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
