#include "baton/sim/stream_stats.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/sim/step_accounting.h"

namespace baton::sim {

using schedule::Action;
using schedule::ActionKind;

namespace {

constexpr double kNotYet = -1;  // times are >= 0
constexpr size_t kBuffer = 64;  // actions read from the source at a time, per rank

// As check_costs() in simulator.cpp, from per-stage sums instead of a walk.
void check_costs(const ActionSource& source, const CostModel& costs, size_t actions) {
  auto fine = [](double x) { return std::isfinite(x) && x >= 0; };
  BATON_CHECK(fine(costs.comm_latency) && fine(costs.comm_bytes_per_time),
              "[sim.costs] communication latency and bandwidth must be finite and non-negative "
              "(latency=",
              costs.comm_latency, ", bytes per time=", costs.comm_bytes_per_time, ")");
  double transfer = 0, time = 0, bytes = 0;
  const double m = source.microbatches();
  for (size_t s = 0; s < costs.stages.size(); ++s) {
    const StageCost& c = costs.stages[s];
    BATON_CHECK(fine(c.forward) && fine(c.input_backward) && fine(c.weight_backward) &&
                    fine(c.activation_bytes) && fine(c.weight_stash_bytes) &&
                    fine(c.boundary_bytes) && fine(c.parameter_bytes),
                "[sim.costs] stage ", s, ": costs must be finite and non-negative (F=", c.forward,
                ", I=", c.input_backward, ", W=", c.weight_backward,
                ", activation bytes=", c.activation_bytes, ", stash bytes=", c.weight_stash_bytes,
                ", boundary bytes=", c.boundary_bytes, ", parameter bytes=", c.parameter_bytes,
                ")");
    if (s + 1 < costs.stages.size())
      transfer = std::max(transfer, costs.comm_time(static_cast<int>(s)));
    time += m * (c.forward + c.input_backward + c.weight_backward);
    bytes += m * c.activation_bytes + c.parameter_bytes;
  }
  time += transfer * static_cast<double>(actions);
  BATON_CHECK(time <= kMaxTotalCost, "[sim.costs] schedule \"", printable(source.name()),
              "\": the times of its ", actions, " actions and their transfers add up to ", time,
              ", more than the limit of ", kMaxTotalCost, "; use smaller costs");
  BATON_CHECK(bytes <= kMaxTotalCost, "[sim.costs] schedule \"", printable(source.name()),
              "\": its activation and parameter bytes add up to ", bytes,
              ", more than the limit of ", kMaxTotalCost);
}

class Stepper {
 public:
  Stepper(const ActionSource& source, const CostModel& costs)
      : source_(source),
        costs_(costs),
        m_(source.microbatches()),
        cells_(static_cast<size_t>(source.stages()) * m_),
        forward_end_(cells_),
        backward_end_(cells_) {
    // Ranks by stage when every micro-batch of a stage runs on one rank (all
    // but Chimera), so the inner loop makes no virtual call.
    by_stage_ = true;
    for (int s = 0; s < source.stages() && by_stage_; ++s) {
      stage_rank_.push_back(source.rank_of(s, 0));
      for (int mb = 1; mb < m_ && by_stage_ && !source.placed_by_stage(); ++mb)
        by_stage_ = source.rank_of(s, mb) == stage_rank_[s];
    }
  }

  // One step with rank r free from free_at[r]; returns when each rank is free
  // again. With `stats`, records busy time, memory and each rank's span.
  std::vector<double> run(std::vector<double> free_at, Stats* stats) {
    const int p = source_.ranks(), S = source_.stages();
    std::fill(forward_end_.begin(), forward_end_.end(), kNotYet);
    std::fill(backward_end_.begin(), backward_end_.end(), kNotYet);
    std::vector<size_t> next(p, 0), buffered(p, 0);
    std::vector<Action> buffer(static_cast<size_t>(p) * kBuffer);
    std::vector<double> activations(p, 0), first_start(p, -1);
    std::vector<int> inflight(p, 0);
    std::deque<int> queue;
    std::vector<char> queued(p, 1);
    for (int r = 0; r < p; ++r) queue.push_back(r);
    auto wake = [&](int r) {
      if (r >= 0 && !queued[r]) queued[r] = 1, queue.push_back(r);
    };
    while (!queue.empty()) {
      const int r = queue.front();
      queue.pop_front();
      queued[r] = 0;
      const size_t size = source_.size(r);
      Action* own = &buffer[static_cast<size_t>(r) * kBuffer];
      while (next[r] < size) {
        const size_t slot = next[r] % kBuffer;
        if (slot == 0 && buffered[r] <= next[r]) {
          const size_t n = std::min(kBuffer, size - next[r]);
          source_.read(r, next[r], n, own);
          buffered[r] = next[r] + n;
        }
        const Action& a = own[slot];
        const int s = a.stage, mb = a.microbatch;
        const size_t c = cell(s, mb);
        double start = free_at[r], duration = 0;
        if (a.kind == ActionKind::F) {
          if (s > 0) {
            const double ready = forward_end_[cell(s - 1, mb)];
            if (ready == kNotYet) break;
            if (rank_of(s - 1, mb) != r) start = std::max(start, ready + costs_.comm_time(s - 1));
          }
          duration = costs_.stages[s].forward;
        } else if (a.kind == ActionKind::W) {
          if (backward_end_[c] == kNotYet) break;
          duration = costs_.stages[s].weight_backward;
        } else {
          if (forward_end_[c] == kNotYet) break;
          if (s + 1 < S) {
            const double ready = backward_end_[cell(s + 1, mb)];
            if (ready == kNotYet) break;
            if (rank_of(s + 1, mb) != r) start = std::max(start, ready + costs_.comm_time(s));
          }
          duration = a.kind == ActionKind::B ? costs_.backward(s) : costs_.stages[s].input_backward;
        }
        const double end = start + duration;
        free_at[r] = end;
        if (a.kind == ActionKind::F) forward_end_[c] = end;
        if (schedule::is_input_backward(a.kind)) backward_end_[c] = end;
        if (stats) record(*stats, r, a, start, end, activations, inflight, first_start);
        if (s > 0) wake(rank_of(s - 1, mb));
        if (s + 1 < S) wake(rank_of(s + 1, mb));
        ++next[r];
      }
    }
    for (int r = 0; r < p; ++r) {
      BATON_CHECK(next[r] == source_.size(r), "[sim.simulate] schedule \"", source_.name(),
                  "\" cannot run to the end; validate it first");
    }
    if (stats) {
      for (int r = 0; r < p; ++r)
        if (first_start[r] >= 0)
          stats->idle_within_span[r] = free_at[r] - first_start[r] - stats->busy[r];
    }
    return free_at;
  }

 private:
  // Micro-batch major: a stage's input and output times share a cache line.
  size_t cell(int s, int mb) const { return static_cast<size_t>(mb) * stages_ + s; }
  int rank_of(int s, int mb) const { return by_stage_ ? stage_rank_[s] : source_.rank_of(s, mb); }

  void record(Stats& stats, int r, const Action& a, double start, double end,
              std::vector<double>& activations, std::vector<int>& inflight,
              std::vector<double>& first_start) {
    const StageCost& cost = costs_.stages[a.stage];
    if (first_start[r] < 0) first_start[r] = start;
    stats.busy[r] += end - start;
    stats.makespan = std::max(stats.makespan, end);
    detail::count_activations(a.kind, cost, inflight[r], activations[r], stats.peak_inflight[r],
                              stats.peak_activation_bytes[r]);
  }

  const ActionSource& source_;
  const CostModel& costs_;
  int m_, stages_ = source_.stages();
  size_t cells_;
  bool by_stage_ = false;
  std::vector<int> stage_rank_;
  std::vector<double> forward_end_, backward_end_;
};

}  // namespace

Stats simulate_stats(const ActionSource& source, const CostModel& costs) {
  BATON_CHECK(static_cast<int>(costs.stages.size()) == source.stages(),
              "[sim.simulate] cost model has ", costs.stages.size(), " stages but schedule \"",
              printable(source.name()), "\" has ", source.stages());
  const size_t lowered_actions = source.lowered_action_count();
  check_costs(source, costs, lowered_actions);
  const int p = source.ranks();
  Stats stats;
  stats.busy.assign(p, 0);
  stats.idle_within_span.assign(p, 0);
  stats.peak_inflight.assign(p, 0);
  stats.peak_activation_bytes.assign(p, 0);
  stats.parameter_bytes.assign(p, 0);
  std::vector<char> held(static_cast<size_t>(p) * source.stages(), 0);
  for (int s = 0; s < source.stages(); ++s)
    for (int mb = 0; mb < (source.placed_by_stage() ? 1 : source.microbatches()); ++mb) {
      const int r = source.rank_of(s, mb);
      if (r >= 0 && !held[static_cast<size_t>(r) * source.stages() + s]++)
        stats.parameter_bytes[r] += costs.stages[s].parameter_bytes;
    }

  Stepper stepper(source, costs);
  std::vector<double> ends = stepper.run(std::vector<double>(p, 0), &stats);
  double busy = 0;
  for (double b : stats.busy) busy += b;
  stats.bubble_fraction = stats.makespan > 0 && p > 0 ? 1.0 - busy / (p * stats.makespan) : 0;

  // As steady_step() in simulator.cpp, with as many steps for the same
  // lowered schedule, so both report the same figure.
  stats.steady_step = detail::settle_steady_step(
      std::move(ends), lowered_actions,
      [&](const std::vector<double>& e) { return stepper.run(e, nullptr); });
  return stats;
}

CostModel uniform_cost_model(const ActionSource& source, double tf, double tb, double tw,
                             double comm) {
  schedule::Schedule shape;  // the shape alone: what uniform_cost_model() reads
  shape.name = source.name();
  shape.ranks = source.ranks();
  shape.stages = source.stages();
  shape.microbatches = source.microbatches();
  shape.map = source.map();
  return uniform_cost_model(shape, tf, tb, tw, comm);
}

}  // namespace baton::sim
