#include "baton/train/compare_sim.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "baton/sim/simulator.h"

namespace baton::train {

void compare_with_simulation(const schedule::Schedule& schedule, const trace::Timeline& measured,
                             const std::map<int, double>& stage_bytes,
                             const std::map<int, double>& boundary_bytes, const comm::P2pCost& link,
                             double measured_peak_bytes, int rank_of_peak) {
  // Mean measured time of each kind (F, B, I, W) per stage.
  std::vector<std::array<double, 4>> sum(schedule.stages, {0, 0, 0, 0}), count = sum;
  for (const auto& e : measured.events) {
    const auto k = static_cast<size_t>(e.kind);
    if (k >= 4) continue;
    sum[e.stage][k] += e.end - e.start;
    count[e.stage][k] += 1;
  }
  auto mean = [&](int s, schedule::ActionKind kind) {
    const auto k = static_cast<size_t>(kind);
    return count[s][k] > 0 ? sum[s][k] / count[s][k] : 0.0;
  };
  sim::CostModel costs;
  costs.comm_latency = link.latency_ms;
  costs.comm_bytes_per_time = link.bytes_per_ms;
  costs.stages.resize(schedule.stages);
  for (int s = 0; s < schedule.stages; ++s) {
    sim::StageCost& cost = costs.stages[s];
    cost.forward = mean(s, schedule::ActionKind::F);
    cost.weight_backward = mean(s, schedule::ActionKind::W);
    // A full B is charged as I + W.
    cost.input_backward = count[s][static_cast<size_t>(schedule::ActionKind::B)] > 0
                              ? mean(s, schedule::ActionKind::B) - cost.weight_backward
                              : mean(s, schedule::ActionKind::I);
    const auto it = stage_bytes.find(s);
    cost.activation_bytes = it == stage_bytes.end() ? 0 : it->second;
    const auto boundary = boundary_bytes.find(s);
    cost.boundary_bytes = boundary == boundary_bytes.end() ? 0 : boundary->second;
  }
  const sim::Result predicted = sim::simulate(schedule, costs);
  const double measured_ms = trace::makespan(measured);
  std::printf(
      "compare-sim: link %.1f us + %.2f GB/s; measured step %.2f ms, simulated %.2f ms "
      "(efficiency %.1f%%); bubble measured %.1f%%, simulated %.1f%%\n",
      link.latency_ms * 1000, link.bytes_per_ms / 1e6, measured_ms, predicted.stats.makespan,
      100.0 * predicted.stats.makespan / std::max(1e-9, measured_ms),
      100.0 * trace::bubble_fraction(measured), 100.0 * predicted.stats.bubble_fraction);
  std::printf(
      "compare-sim: simulated steady step %.2f ms (steps back to back without a barrier), "
      "makespan %.2f ms\n",
      predicted.stats.steady_step, predicted.stats.makespan);
  // Action by action: the start that strays furthest from its prediction.
  std::map<std::tuple<int, int, int, int>, double> simulated_start;
  for (const auto& e : predicted.timeline.events) {
    simulated_start[{e.rank, e.stage, e.microbatch, static_cast<int>(e.kind)}] = e.start;
  }
  const trace::Event* worst = nullptr;
  double worst_deviation = 0;
  for (const auto& e : measured.events) {
    const auto it = simulated_start.find({e.rank, e.stage, e.microbatch, static_cast<int>(e.kind)});
    if (it == simulated_start.end()) continue;
    const double deviation = e.start - it->second;
    if (worst == nullptr || std::abs(deviation) > std::abs(worst_deviation)) {
      worst = &e;
      worst_deviation = deviation;
    }
  }
  if (worst != nullptr) {
    std::printf(
        "compare-sim: largest start deviation %+.3f ms at rank %d %s (measured %.3f ms)\n",
        worst_deviation, worst->rank,
        schedule::to_string(schedule::Action{worst->kind, worst->stage, worst->microbatch}).c_str(),
        worst->start);
  }
  std::printf("compare-sim: peak activation bytes on rank %d: measured %.0f, simulated %.0f\n",
              rank_of_peak, measured_peak_bytes,
              predicted.stats.peak_activation_bytes[rank_of_peak]);
}

}  // namespace baton::train
