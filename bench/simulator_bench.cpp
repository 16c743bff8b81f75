// How fast the simulator runs a large schedule: p = 64 ranks, m = 1024
// micro-batches, including lowering and validation. Figures in bench/RESULTS.md.
#include <benchmark/benchmark.h>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/validate.h"
#include "baton/sim/simulator.h"
#include "baton/sim/stream_stats.h"

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

// The stats-only path on a closed-form schedule: nothing is generated, lowered
// or recorded. p = 64, m = 1024 as above, and the p = m = 3072.
void BM_SimulateStats(benchmark::State& state, const std::string& name, int p, int m) {
  const auto options = baton::schedule::GeneratorOptions{}.set_ranks(p).set_microbatches(m);
  const auto source = baton::sim::closed_form_source(name, options);
  const auto costs = baton::sim::uniform_cost_model(*source, 1, 2, 1, 0.1);
  for (auto _ : state) {
    auto stats = baton::sim::simulate_stats(*source, costs);
    benchmark::DoNotOptimize(stats.steady_step);
  }
  state.counters["actions"] = static_cast<double>(source->lowered_action_count());
}

}  // namespace

BENCHMARK_CAPTURE(BM_SimulateStats, 1f1b, std::string("1f1b"), 64, 1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SimulateStats, interleaved, std::string("interleaved"), 64, 1024)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SimulateStats, 1f1b_3072, std::string("1f1b"), 3072, 3072)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_Simulate, 1f1b, std::string("1f1b"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, zb_h1, std::string("zb-h1"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Simulate, interleaved, std::string("interleaved"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Validate, 1f1b, std::string("1f1b"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateAndLower, 1f1b, std::string("1f1b"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_GenerateAndLower, zb_h1, std::string("zb-h1"))->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
