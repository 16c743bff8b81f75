#include "baton/train/compare_sim.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "baton/sim/simulator.h"

namespace baton::train {

namespace {

// The simulator's costs: the mean measured time of each kind (F, B, I, W)
// per stage of `measured`, the bytes, the link and the dp all-reduce.
sim::CostModel measured_costs(const schedule::Schedule& schedule, const trace::Timeline& measured,
                              const std::map<int, double>& stage_bytes,
                              const std::map<int, double>& boundary_bytes,
                              const comm::P2pCost& link, const DataParallelCosts* dp,
                              const std::map<int, double>& skip_bytes) {
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
  // Each skip connection's own bytes (measured where it was sent).
  costs.skip_bytes.assign(schedule.skips.size(), -1);
  for (const auto& [skip, bytes] : skip_bytes) {
    if (skip >= 0 && static_cast<size_t>(skip) < costs.skip_bytes.size())
      costs.skip_bytes[skip] = bytes;
  }
  if (dp != nullptr && dp->dp > 1) {
    costs.dp = dp->dp;
    costs.dp_link = sim::Link{dp->link.step_latency_ms, dp->link.bytes_per_ms};
    for (int s = 0; s < schedule.stages && static_cast<size_t>(s) < dp->bucket_bytes.size(); ++s)
      costs.stages[s].bucket_bytes = dp->bucket_bytes[s];
  }
  return costs;
}

// With dp > 1 the step, bubble and start comparisons are of the first
// replica's pipeline (world ranks r with r % (dp x tp) == 0, as pipeline
// rank r / (dp x tp)); the all-reduces are compared on every world rank.
trace::Timeline first_replica(const schedule::Schedule& schedule, const trace::Timeline& world,
                              const DataParallelCosts* dp) {
  if (dp == nullptr || dp->world_per_pipeline_rank <= 1) return world;
  trace::Timeline first;
  first.title = world.title;
  first.time_unit = world.time_unit;
  first.ranks = schedule.ranks;
  for (trace::Event e : world.events) {
    if (e.rank % dp->world_per_pipeline_rank != 0) continue;
    e.rank /= dp->world_per_pipeline_rank;
    first.events.push_back(e);
  }
  return first;
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

void compare_pipeline(const schedule::Schedule& schedule, const trace::Timeline& measured,
                      const trace::Timeline& world, const std::map<int, double>& stage_bytes,
                      const std::map<int, double>& boundary_bytes, const comm::P2pCost& link,
                      const PeakActivations& peak, const DataParallelCosts* dp,
                      const std::map<int, double>& skip_bytes) {
  const sim::Result predicted = sim::simulate(
      schedule,
      measured_costs(schedule, measured, stage_bytes, boundary_bytes, link, dp, skip_bytes));
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
  std::printf("compare-sim: peak activation bytes on rank %d: measured %.0f, simulated %.0f (%s)\n",
              peak.rank, peak.measured_bytes, predicted.stats.peak_activation_bytes[peak.rank],
              peak.allocator ? "the counting allocator's activations at the peak; simulated: the "
                               "measured layers' kept bytes per micro-batch in flight"
                             : "the stages' inputs, as the executor counts them, both sides");
  if (dp == nullptr || dp->dp <= 1) return;
  std::printf(
      "compare-sim: dp all-reduce probed at %.1f us a ring step + %.2f GB/s (%d replicas)\n",
      dp->link.step_latency_ms * 1000, dp->link.bytes_per_ms / 1e6, dp->dp);
  const auto hidden = [](double total, double exposed) {
    return total > 0 ? 100.0 * std::max(0.0, 1 - exposed / total) : 0.0;
  };
  for (int r = 0; r < world.ranks; ++r) {
    const trace::Reductions got = trace::reductions_of_rank(world.events, r);
    const int pipeline_rank = r / std::max(1, dp->world_per_pipeline_rank);
    if (pipeline_rank >= static_cast<int>(predicted.stats.reduce_grad.size())) continue;
    const double total = predicted.stats.reduce_grad[pipeline_rank];
    const double exposed = predicted.stats.exposed_reduction[pipeline_rank];
    std::printf(
        "compare-sim: rank %d all-reduce measured %.2f ms, exposed %.2f ms (hidden %.1f%%); "
        "simulated %.2f ms, exposed %.2f ms (hidden %.1f%%)\n",
        r, got.total, got.exposed, hidden(got.total, got.exposed), total, exposed,
        hidden(total, exposed));
  }
}

}  // namespace

void compare_with_simulation(const schedule::Schedule& schedule, const trace::Timeline& measured,
                             const std::map<int, double>& stage_bytes,
                             const std::map<int, double>& boundary_bytes, const comm::P2pCost& link,
                             const PeakActivations& peak, const DataParallelCosts* dp,
                             const std::map<int, double>& skip_bytes,
                             const std::vector<trace::Timeline>& earlier) {
  compare_pipeline(schedule, first_replica(schedule, measured, dp), measured, stage_bytes,
                   boundary_bytes, link, peak, dp, skip_bytes);
  if (earlier.empty()) return;
  // One step is a few ms here and there; a hiccup of the machine moves it
  // by more than the figure's own size. The median over the compared steps
  // is the figure to quote.
  std::vector<double> efficiency, measured_bubble, simulated_bubble;
  std::vector<const trace::Timeline*> steps;
  for (const auto& step : earlier) steps.push_back(&step);
  steps.push_back(&measured);
  for (const trace::Timeline* world : steps) {
    const trace::Timeline pipeline = first_replica(schedule, *world, dp);
    const sim::Result predicted = sim::simulate(
        schedule,
        measured_costs(schedule, pipeline, stage_bytes, boundary_bytes, link, dp, skip_bytes));
    efficiency.push_back(100.0 * predicted.stats.makespan /
                         std::max(1e-9, trace::makespan(pipeline)));
    measured_bubble.push_back(100.0 * trace::bubble_fraction(pipeline));
    simulated_bubble.push_back(100.0 * predicted.stats.bubble_fraction);
  }
  std::printf(
      "compare-sim: over the last %zu steps, each after a barrier: efficiency median %.1f%% "
      "(%.1f%% to %.1f%%); bubble median measured %.1f%%, simulated %.1f%%\n",
      steps.size(), median_of(efficiency), *std::min_element(efficiency.begin(), efficiency.end()),
      *std::max_element(efficiency.begin(), efficiency.end()), median_of(measured_bubble),
      median_of(simulated_bubble));
}

}  // namespace baton::train
