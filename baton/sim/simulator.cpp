#include "baton/sim/simulator.h"

#include <algorithm>

#include "baton/core/error.h"
#include "baton/schedule/walk.h"

namespace baton::sim {

using schedule::Action;
using schedule::ActionKind;

Result simulate(const schedule::Schedule& schedule, const CostModel& costs) {
  BATON_CHECK(static_cast<int>(costs.stages.size()) == schedule.stages, "[sim.simulate] cost model has ",
              costs.stages.size(), " stages but schedule \"", schedule.name, "\" has ",
              schedule.stages);
  const int p = schedule.ranks, m = schedule.microbatches;
  const schedule::Placement placement(schedule);
  auto cell = [m](int s, int mb) { return static_cast<size_t>(s) * m + mb; };
  const size_t cells = static_cast<size_t>(schedule.stages) * m;
  std::vector<double> forward_end(cells, 0), backward_end(cells, 0);
  std::vector<double> sent_forward(cells, 0), sent_backward(cells, 0);
  std::vector<double> free_at(p, 0), first_start(p, -1), activations(p, 0);
  std::vector<int> inflight(p, 0);

  Result result;
  result.timeline.ranks = p;
  result.timeline.title = schedule.name + " p=" + std::to_string(p) +
                          " m=" + std::to_string(m) + " (simulated)";
  Stats& stats = result.stats;
  stats.peak_inflight.assign(p, 0);
  stats.peak_activation_bytes.assign(p, 0);
  stats.parameter_bytes.assign(p, 0);
  for (int r = 0; r < p; ++r)
    for (int s : placement.stages_of_rank(r)) stats.parameter_bytes[r] += costs.stages[s].parameter_bytes;

  auto run = [&](int r, size_t index, int producer) {
    const Action& a = schedule.actions[r][index];
    const int s = a.stage, mb = a.microbatch;
    const StageCost& cost = costs.stages[s];
    switch (a.kind) {
      case ActionKind::SEND_F: sent_forward[cell(s, mb)] = free_at[r]; return;
      case ActionKind::SEND_B: sent_backward[cell(s, mb)] = free_at[r]; return;
      case ActionKind::RECV_F:
        free_at[r] = std::max(free_at[r], sent_forward[cell(s - 1, mb)] + costs.comm_time(s - 1));
        return;
      case ActionKind::RECV_B:
        free_at[r] = std::max(free_at[r], sent_backward[cell(s + 1, mb)] + costs.comm_time(s));
        return;
      default: break;
    }
    double start = free_at[r];
    double duration = 0;
    if (a.kind == ActionKind::F) {
      if (producer >= 0) start = std::max(start, forward_end[cell(s - 1, mb)] + costs.comm_time(s - 1));
      duration = cost.forward;
    } else if (a.kind == ActionKind::W) {
      duration = cost.weight_backward;
    } else {
      if (producer >= 0) start = std::max(start, backward_end[cell(s + 1, mb)] + costs.comm_time(s));
      duration = a.kind == ActionKind::B ? costs.backward(s) : cost.input_backward;
    }
    const double end = start + duration;
    free_at[r] = end;
    if (first_start[r] < 0) first_start[r] = start;
    result.timeline.events.push_back({r, s, mb, a.kind, start, end});

    if (a.kind == ActionKind::F) {
      forward_end[cell(s, mb)] = end;
      ++inflight[r];
      activations[r] += cost.activation_bytes;
    } else if (a.kind == ActionKind::B) {
      backward_end[cell(s, mb)] = end;
      --inflight[r];
      activations[r] -= cost.activation_bytes;
    } else if (a.kind == ActionKind::I) {
      backward_end[cell(s, mb)] = end;
      --inflight[r];
      activations[r] -= cost.activation_bytes - cost.weight_stash_bytes;
    } else {
      activations[r] -= cost.weight_stash_bytes;
    }
    stats.peak_inflight[r] = std::max(stats.peak_inflight[r], inflight[r]);
    stats.peak_activation_bytes[r] = std::max(stats.peak_activation_bytes[r], activations[r]);
  };
  const schedule::WalkResult walked = schedule::walk(schedule, placement, run);
  BATON_CHECK(walked.complete, "[sim.simulate] schedule \"", schedule.name,
              "\" cannot run to the end; validate it first");

  stats.makespan = trace::makespan(result.timeline);
  stats.busy = trace::busy_time(result.timeline);
  stats.bubble_fraction = trace::bubble_fraction(result.timeline);
  stats.idle_within_span.assign(p, 0);
  for (int r = 0; r < p; ++r) {
    if (first_start[r] >= 0) stats.idle_within_span[r] = free_at[r] - first_start[r] - stats.busy[r];
  }
  return result;
}

}  // namespace baton::sim
