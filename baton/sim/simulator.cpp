#include "baton/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/unroll.h"
#include "baton/schedule/walk.h"
#include "baton/sim/step_accounting.h"

namespace baton::sim {

using schedule::Action;
using schedule::ActionKind;

namespace {

// Every cost finite and non-negative, and their sums over the schedule within
// kMaxTotalCost, so that no time, statistic or drawing overflows.
void check_costs(const schedule::Schedule& schedule, const CostModel& costs) {
  auto fine = [](double x) { return std::isfinite(x) && x >= 0; };
  BATON_CHECK(fine(costs.comm_latency) && fine(costs.comm_bytes_per_time),
              "[sim.costs] communication latency and bandwidth must be finite and non-negative "
              "(latency=",
              costs.comm_latency, ", bytes per time=", costs.comm_bytes_per_time, ")");
  BATON_CHECK(costs.dp >= 1 && fine(costs.dp_link.latency) && fine(costs.dp_link.bytes_per_time),
              "[sim.costs] the data-parallel group needs dp >= 1 and a finite, non-negative "
              "latency and bandwidth (dp=",
              costs.dp, ", latency=", costs.dp_link.latency,
              ", bytes per time=", costs.dp_link.bytes_per_time, ")");
  for (size_t s = 0; s < costs.stages.size(); ++s) {
    const StageCost& c = costs.stages[s];
    BATON_CHECK(fine(c.forward) && fine(c.input_backward) && fine(c.weight_backward) &&
                    fine(c.activation_bytes) && fine(c.weight_stash_bytes) &&
                    fine(c.boundary_bytes) && fine(c.parameter_bytes) && fine(c.tp_comm) &&
                    fine(c.tied_bytes) && fine(c.clip),
                "[sim.costs] stage ", s, ": costs must be finite and non-negative (F=", c.forward,
                ", I=", c.input_backward, ", W=", c.weight_backward,
                ", activation bytes=", c.activation_bytes, ", stash bytes=", c.weight_stash_bytes,
                ", boundary bytes=", c.boundary_bytes, ", parameter bytes=", c.parameter_bytes,
                ", tp comm=", c.tp_comm, ", tied bytes=", c.tied_bytes, ", clip=", c.clip, ")");
    for (size_t k = 0; k < c.bucket_bytes.size(); ++k) {
      BATON_CHECK(fine(c.bucket_bytes[k]), "[sim.costs] stage ", s, " bucket ", k,
                  ": bytes must be finite and non-negative, got ", c.bucket_bytes[k]);
    }
  }
  // Each action may wait for one transfer at most; charge one to every action.
  double transfer = 0;
  for (int s = 0; s + 1 < schedule.stages; ++s) transfer = std::max(transfer, costs.comm_time(s));
  double time = 0, bytes = 0;
  for (const auto& list : schedule.actions) {
    for (const Action& a : list) {
      const StageCost& c = costs.stages[a.stage];
      if (a.kind == ActionKind::REDUCE_TIED) {
        time += costs.reduce_tied_time(a.stage);
        continue;
      }
      if (a.kind == ActionKind::CLIP_NORM) {
        time += costs.clip_norm_time(schedule.ranks);
        for (const StageCost& stage : costs.stages) time += stage.clip;
        continue;
      }
      if (a.kind == ActionKind::UNSHARD) {
        time += costs.unshard_time(a.stage);
        continue;
      }
      if (a.kind == ActionKind::RESHARD) continue;
      if (schedule::is_reduction(a.kind)) {
        BATON_CHECK(a.microbatch < c.bucket_count(), "[sim.costs] ", schedule::to_string(a),
                    " reduces bucket ", a.microbatch, " but the cost model gives stage ", a.stage,
                    " ", c.bucket_count(), " bucket", c.bucket_count() == 1 ? "" : "s");
        time += costs.reduce_grad_time(a.stage, a.microbatch);
        continue;
      }
      time += transfer;
      if (a.kind == ActionKind::F) time += c.forward + c.tp_comm, bytes += c.activation_bytes;
      if (a.kind == ActionKind::B) time += c.input_backward + c.weight_backward + c.tp_comm;
      if (a.kind == ActionKind::I) time += c.input_backward + c.tp_comm;
      if (a.kind == ActionKind::W) time += c.weight_backward;
    }
  }
  for (const StageCost& c : costs.stages) {
    bytes += c.parameter_bytes;
    for (double b : c.bucket_bytes) bytes += b;
    bytes += c.tied_bytes;
  }
  BATON_CHECK(time <= kMaxTotalCost, "[sim.costs] schedule \"", printable(schedule.name),
              "\": the times of its ", schedule.action_count(),
              " actions and their transfers add up to ", time, ", more than the limit of ",
              kMaxTotalCost, "; use smaller costs");
  BATON_CHECK(bytes <= kMaxTotalCost, "[sim.costs] schedule \"", printable(schedule.name),
              "\": its activation and parameter bytes add up to ", bytes,
              ", more than the limit of ", kMaxTotalCost);
}

// Runs one step with rank r free from `free_at[r]` on, and returns when each
// rank is free again: its compute done and its gradient reductions (on its
// communication stream) finished. With `result`, records the events and the
// memory and reduction statistics, and each rank's first start into
// `first_start`.
std::vector<double> run_step(const schedule::Schedule& schedule, const CostModel& costs,
                             const schedule::Placement& placement, std::vector<double> free_at,
                             Result* result, std::vector<double>* first_start) {
  const int p = schedule.ranks, m = schedule.microbatches;
  auto cell = [m](int s, int mb) { return static_cast<size_t>(s) * m + mb; };
  const size_t cells = static_cast<size_t>(schedule.stages) * m;
  std::vector<double> forward_end(cells, 0), backward_end(cells, 0);
  std::vector<double> sent_forward(cells, 0), sent_backward(cells, 0);
  // A skip connection's transfers, per (skip, micro-batch); each is charged
  // its own bytes (CostModel::skip_time).
  const size_t skip_cells = schedule.skips.size() * static_cast<size_t>(m);
  std::vector<double> skip_forward(skip_cells, 0), skip_backward(skip_cells, 0);
  std::vector<double> activations(p, 0);
  std::vector<int> inflight(p, 0);
  std::vector<double> comm_free = free_at;  // each rank's communication stream
  // Per (rank, stage): when its UNSHARD's all-gather ends (its computes wait).
  std::vector<double> gathered(static_cast<size_t>(p) * schedule.stages, 0);
  auto gathered_at = [&](int r, int s) -> double& {
    return gathered[static_cast<size_t>(r) * schedule.stages + s];
  };
  struct Tied {
    int rank;
    size_t index;
    double start;
  };
  std::vector<Tied> tied;   // REDUCE_TIEDs reached, timed once the walk is over
  std::vector<Tied> clips;  // CLIP_NORMs reached, likewise

  auto run = [&](int r, size_t index, int producer) {
    const Action& a = schedule.actions[r][index];
    const int s = a.stage, mb = a.microbatch;
    const StageCost& cost = costs.stages[s];
    if (a.skip >= 0) {
      const size_t slot = static_cast<size_t>(a.skip) * m + mb;
      const double transfer = costs.skip_time(a.skip, schedule.skips[a.skip].from);
      switch (a.kind) {
        case ActionKind::SEND_F:
          skip_forward[slot] = free_at[r];
          return;
        case ActionKind::SEND_B:
          skip_backward[slot] = free_at[r];
          return;
        case ActionKind::RECV_F:
          free_at[r] = std::max(free_at[r], skip_forward[slot] + transfer);
          return;
        default:  // RECV_B
          free_at[r] = std::max(free_at[r], skip_backward[slot] + transfer);
          return;
      }
    }
    switch (a.kind) {
      case ActionKind::SEND_F:
        sent_forward[cell(s, mb)] = free_at[r];
        return;
      case ActionKind::SEND_B:
        sent_backward[cell(s, mb)] = free_at[r];
        return;
      case ActionKind::RECV_F:
        free_at[r] = std::max(free_at[r], sent_forward[cell(s - 1, mb)] + costs.comm_time(s - 1));
        return;
      case ActionKind::RECV_B:
        free_at[r] = std::max(free_at[r], sent_backward[cell(s + 1, mb)] + costs.comm_time(s));
        return;
      case ActionKind::UNSHARD: {
        // Issued on the communication stream; the stage's computes wait for it.
        const double start = std::max(free_at[r], comm_free[r]);
        comm_free[r] = start + costs.unshard_time(s);
        gathered_at(r, s) = comm_free[r];
        if (!result) return;
        if ((*first_start)[r] < 0) (*first_start)[r] = start;
        result->timeline.events.push_back({r, s, mb, a.kind, start, comm_free[r]});
        return;
      }
      case ActionKind::RESHARD:
        if (result) result->timeline.events.push_back({r, s, mb, a.kind, free_at[r], free_at[r]});
        return;
      case ActionKind::REDUCE_GRAD:
      case ActionKind::REDUCE_SCATTER: {
        // Issued when the rank's compute reaches it; the compute goes on.
        const double start = std::max(free_at[r], comm_free[r]);
        comm_free[r] = start + costs.reduce_grad_time(s, mb);
        if (!result) return;
        if ((*first_start)[r] < 0) (*first_start)[r] = start;
        result->timeline.events.push_back({r, s, mb, a.kind, start, comm_free[r]});
        result->stats.reduce_grad[r] += comm_free[r] - start;
        return;
      }
      case ActionKind::REDUCE_TIED: {
        // The executor waits for the rank's REDUCE_GRADs first; the exchange
        // ends once every member has arrived (below: every REDUCE_TIED ends
        // its rank's list, so nothing in the walk waits for it).
        tied.push_back({r, index, std::max(free_at[r], comm_free[r])});
        return;
      }
      case ActionKind::CLIP_NORM: {
        // Every rank's last action, after its reductions: timed below.
        clips.push_back({r, index, 0});
        return;
      }
      default:
        break;
    }
    double start = std::max(free_at[r], gathered_at(r, s));
    double duration = 0;
    if (a.kind == ActionKind::F) {
      if (producer >= 0)
        start = std::max(start, forward_end[cell(s - 1, mb)] + costs.comm_time(s - 1));
      duration = cost.forward + cost.tp_comm;
    } else if (a.kind == ActionKind::W) {
      duration = cost.weight_backward;
    } else {
      if (producer >= 0)
        start = std::max(start, backward_end[cell(s + 1, mb)] + costs.comm_time(s));
      duration = (a.kind == ActionKind::B ? costs.backward(s) : cost.input_backward) + cost.tp_comm;
    }
    const double end = start + duration;
    free_at[r] = end;
    if (a.kind == ActionKind::F) forward_end[cell(s, mb)] = end;
    if (schedule::is_input_backward(a.kind)) backward_end[cell(s, mb)] = end;
    if (!result) return;
    if ((*first_start)[r] < 0) (*first_start)[r] = start;
    result->timeline.events.push_back({r, s, mb, a.kind, start, end});
    Stats& stats = result->stats;
    detail::count_activations(a.kind, cost, inflight[r], activations[r], stats.peak_inflight[r],
                              stats.peak_activation_bytes[r]);
  };
  const schedule::WalkResult walked = schedule::walk(schedule, placement, run);
  BATON_CHECK(walked.complete, "[sim.simulate] schedule \"", schedule.name,
              "\" cannot run to the end; validate it first");
  // Each tie group: its members exchange once the last of them is there; a
  // group on one rank sums locally, in no time.
  std::map<int, std::vector<const Tied*>> groups;
  for (const Tied& t : tied) groups[schedule.actions[t.rank][t.index].microbatch].push_back(&t);
  for (const auto& [group, members] : groups) {
    double ready = 0, cost = 0;
    bool several_ranks = false;
    for (const Tied* t : members) {
      ready = std::max(ready, t->start);
      cost = std::max(cost, costs.reduce_tied_time(schedule.actions[t->rank][t->index].stage));
      several_ranks |= t->rank != members.front()->rank;
    }
    const double end = ready + (several_ranks ? cost : 0);
    for (const Tied* t : members) {
      comm_free[t->rank] = std::max(comm_free[t->rank], end);
      if (!result) continue;
      const Action& a = schedule.actions[t->rank][t->index];
      if ((*first_start)[t->rank] < 0) (*first_start)[t->rank] = t->start;
      result->timeline.events.push_back({t->rank, a.stage, a.microbatch, a.kind, t->start, end});
    }
  }
  // The clip: each rank adds up its stages' squares once its reductions are
  // done, the world sums them once the last rank is there, and each rank
  // scales its gradients (the second half of its local work).
  if (!clips.empty()) {
    std::vector<double> start(p, 0), local(p, 0);
    double ready = 0;
    for (const Tied& c : clips) {
      start[c.rank] = std::max(free_at[c.rank], comm_free[c.rank]);
      for (int s : placement.stages_of_rank(c.rank)) local[c.rank] += costs.stages[s].clip;
      ready = std::max(ready, start[c.rank] + local[c.rank] / 2);
    }
    const double reduced = ready + costs.clip_norm_time(p);
    for (const Tied& c : clips) {
      const double end = reduced + local[c.rank] / 2;
      comm_free[c.rank] = std::max(comm_free[c.rank], end);
      if (!result) continue;
      const Action& a = schedule.actions[c.rank][c.index];
      if ((*first_start)[c.rank] < 0) (*first_start)[c.rank] = start[c.rank];
      result->timeline.events.push_back(
          {c.rank, a.stage, a.microbatch, a.kind, start[c.rank], end});
    }
  }
  for (int r = 0; r < p; ++r) {
    if (result) result->stats.exposed_reduction[r] = std::max(0.0, comm_free[r] - free_at[r]);
    free_at[r] = std::max(free_at[r], comm_free[r]);
  }
  return free_at;
}

double steady_step(const schedule::Schedule& schedule, const CostModel& costs,
                   const schedule::Placement& placement, std::vector<double> ends) {
  return detail::settle_steady_step(
      std::move(ends), schedule.action_count(), [&](const std::vector<double>& e) {
        return run_step(schedule, costs, placement, e, nullptr, nullptr);
      });
}

// A window without a flush (Schedule::carries): its one step from an empty
// pipeline to an empty one (the window unrolled once and drained), and the
// time per step of the window run back to back: the makespan of k + n steps
// less that of k steps, over n (the fill and the drain cancel out).
Result simulate_carried(const schedule::Schedule& window, const CostModel& costs) {
  Result result = simulate(schedule::unroll(window, 1), costs);
  const int n = static_cast<int>(std::clamp<size_t>(
      kSteadyStepActions / std::max<size_t>(1, 4 * window.action_count()), 1, 8));
  auto makespan = [&](int steps) {
    const schedule::Schedule unrolled = schedule::unroll(window, steps);
    const schedule::Placement placement(unrolled);
    const auto ends = run_step(unrolled, costs, placement, std::vector<double>(unrolled.ranks, 0),
                               nullptr, nullptr);
    return *std::max_element(ends.begin(), ends.end());
  };
  result.stats.steady_step = (makespan(2 + n) - makespan(2)) / n;
  return result;
}

}  // namespace

Result simulate(const schedule::Schedule& schedule, const CostModel& costs) {
  if (schedule.carries) return simulate_carried(schedule, costs);
  BATON_CHECK(static_cast<int>(costs.stages.size()) == schedule.stages,
              "[sim.simulate] cost model has ", costs.stages.size(), " stages but schedule \"",
              printable(schedule.name), "\" has ", schedule.stages);
  check_costs(schedule, costs);
  const int p = schedule.ranks, m = schedule.microbatches;
  const schedule::Placement placement(schedule);

  Result result;
  result.timeline.ranks = p;
  result.timeline.title =
      schedule.name + " p=" + std::to_string(p) + " m=" + std::to_string(m) + " (simulated)";
  Stats& stats = result.stats;
  stats.peak_inflight.assign(p, 0);
  stats.peak_activation_bytes.assign(p, 0);
  stats.parameter_bytes.assign(p, 0);
  stats.reduce_grad.assign(p, 0);
  stats.exposed_reduction.assign(p, 0);
  for (int r = 0; r < p; ++r)
    for (int s : placement.stages_of_rank(r))
      stats.parameter_bytes[r] += costs.stages[s].parameter_bytes;
  stats.peak_parameter_bytes = stats.parameter_bytes;
  bool reshards = false;
  for (const auto& list : schedule.actions)
    for (const Action& a : list) reshards |= a.kind == ActionKind::RESHARD;
  for (int r = 0; reshards && r < p; ++r) {
    double held = stats.parameter_bytes[r] / costs.dp;  // the shards at rest
    double peak = held;
    for (const Action& a : schedule.actions[r]) {
      if (a.kind == ActionKind::UNSHARD) held += costs.stages[a.stage].parameter_bytes;
      if (a.kind == ActionKind::RESHARD) held -= costs.stages[a.stage].parameter_bytes;
      peak = std::max(peak, held);
    }
    stats.peak_parameter_bytes[r] = peak;
  }

  std::vector<double> first_start(p, -1);
  const std::vector<double> free_at =
      run_step(schedule, costs, placement, std::vector<double>(p, 0), &result, &first_start);

  stats.makespan = trace::makespan(result.timeline);
  stats.busy = trace::busy_time(result.timeline);
  stats.bubble_fraction = trace::bubble_fraction(result.timeline);
  stats.idle_within_span.assign(p, 0);
  for (int r = 0; r < p; ++r) {
    if (first_start[r] >= 0)
      stats.idle_within_span[r] = free_at[r] - first_start[r] - stats.busy[r];
  }
  stats.steady_step = steady_step(schedule, costs, placement, free_at);
  return result;
}

}  // namespace baton::sim
