// What the full simulator (simulator.cpp) and the stats-only one
// (stream_stats.cpp) count alike, so that both report the same figures:
// activation memory per action, and the steady step of back-to-back steps.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "baton/schedule/action.h"
#include "baton/sim/cost_model.h"
#include "baton/sim/simulator.h"

namespace baton::sim::detail {

// One rank's activations as it runs `kind` of a stage costing `cost`: an F
// stashes them, a B frees them, an I frees all but what W needs, and W the
// rest. Updates the rank's running figures and their peaks.
inline void count_activations(schedule::ActionKind kind, const StageCost& cost, int& inflight,
                              double& activations, int& peak_inflight, double& peak_activations) {
  using schedule::ActionKind;
  if (kind == ActionKind::F) {
    ++inflight;
    activations += cost.activation_bytes;
  } else if (kind == ActionKind::B) {
    --inflight;
    activations -= cost.activation_bytes;
  } else if (kind == ActionKind::I) {
    --inflight;
    activations -= cost.activation_bytes - cost.weight_stash_bytes;
  } else {
    activations -= cost.weight_stash_bytes;
  }
  peak_inflight = std::max(peak_inflight, inflight);
  peak_activations = std::max(peak_activations, activations);
}

// Steps run back to back, each rank starting step i + 1 when its own part of
// step i ends (`ends`, per rank; `next_step(ends)` gives the next ends). The
// ends grow by a max-plus linear map, so they settle into growing by the same
// period on every rank; stop when two consecutive steps add the same time to
// every rank, else average the second half of the steps. `actions` (of the
// lowered schedule) sets how many steps: fewer for large schedules.
template <typename NextStep>
double settle_steady_step(std::vector<double> ends, size_t actions, NextStep next_step) {
  const int steps = static_cast<int>(
      std::clamp<size_t>(kSteadyStepActions / std::max<size_t>(1, actions), 2, kSteadySteps));
  auto last = [](const std::vector<double>& e) { return *std::max_element(e.begin(), e.end()); };
  std::vector<double> totals{last(ends)}, added(ends.size(), -1);
  for (int k = 1; k <= steps; ++k) {
    std::vector<double> next = next_step(ends);
    bool periodic = true;
    for (size_t r = 0; r < next.size(); ++r) {
      const double d = next[r] - ends[r];
      const double tolerance = 1e-12 * std::max(1.0, next[r]);
      periodic = periodic && std::abs(d - added[r]) <= tolerance &&
                 std::abs(d - (next[0] - ends[0])) <= tolerance;
      added[r] = d;
    }
    ends = std::move(next);
    totals.push_back(last(ends));
    if (periodic) return added[0];
  }
  const int half = steps / 2;
  return (totals[steps] - totals[half]) / (steps - half);
}

}  // namespace baton::sim::detail
