// Discrete-event simulation of a schedule against a cost model. Each rank
// runs its actions in order; a compute action starts when the rank is free
// and its input is there; sends are asynchronous and cost the sender nothing;
// an input made on another rank arrives comm_time after the action that made
// it ends (or after its SEND, in a lowered schedule).
// A REDUCE_GRAD runs on its rank's communication stream: it starts when the
// rank's compute reaches it and the stream is free, takes the ring all-reduce
// time of its bucket (cost_model.h), and holds up no compute; a rank's part of
// the step ends when both its compute and its reductions are done. A
// REDUCE_TIED (the last actions of a rank) starts once the rank's compute and
// REDUCE_GRADs are done; its tie group's exchange ends reduce_tied_time()
// after the group's last member starts (at once for a group on one rank).
#pragma once

#include <vector>

#include "baton/schedule/schedule.h"
#include "baton/sim/cost_model.h"
#include "baton/trace/timeline.h"

namespace baton::sim {

struct Stats {
  double makespan = 0;  // time the last action ends; the step starts at 0
  // Time per step in the steady state of steps run back to back, each rank
  // starting step i + 1 as soon as its own part of step i is done (no barrier
  // between steps; a step's data do not depend on the previous step's other
  // ranks). At most the makespan; at least the busiest rank's busy time.
  double steady_step = 0;
  double bubble_fraction = 0;  // 1 - sum of busy time / (ranks * makespan)
  std::vector<double> busy;    // per rank: compute time (F, B, I, W)
  // Per rank: idle time between its first action's start and its last's end.
  std::vector<double> idle_within_span;
  // Per rank: peak activation memory counted in micro-batches' worth of one
  // stage chunk's activations: an F adds one, the backward that frees its
  // activations (B, or I when the backward is split; what W still needs is the
  // separate weight stash of peak_activation_bytes) removes it.
  std::vector<int> peak_inflight;
  std::vector<double> peak_activation_bytes;  // per rank
  std::vector<double> parameter_bytes;        // per rank: the stages it holds
  // Per rank, under ZeRO-3 (a schedule with RESHARD; schedule/sharding.h):
  // the most parameter bytes held at once in its list's order: each stage's
  // 1/dp shard, plus the stage's whole parameter bytes from its UNSHARD to
  // its RESHARD. parameter_bytes otherwise.
  std::vector<double> peak_parameter_bytes;
  // Per rank: time its REDUCE_GRADs take in all, and how much of it is
  // exposed (the end of its reductions, REDUCE_TIED included, past the
  // rank's last compute; 0 if none).
  std::vector<double> reduce_grad;
  std::vector<double> exposed_reduction;
};

struct Result {
  trace::Timeline timeline;
  Stats stats;
};

// The most that every action's time and every transfer of a step may add up
// to (the step time can be no longer), and likewise every forward's activation
// bytes. Far from overflow, so every statistic and writer's figure is finite.
inline constexpr double kMaxTotalCost = 1e300;

// steady_step simulates at most kSteadySteps more steps, and fewer for large
// schedules (about kSteadyStepActions actions in all, but at least 2 steps).
inline constexpr size_t kSteadySteps = 64;
inline constexpr size_t kSteadyStepActions = 20'000'000;

// REQUIRES: `schedule` is valid (validate() passes); one StageCost per stage.
// Throws baton::Error if a cost is negative or not finite, or if the costs of
// the schedule's actions add up to more than kMaxTotalCost.
// A schedule without a flush (Schedule::carries, 2bw): the timeline and stats
// are those of one step from an empty pipeline to an empty one (the window
// unrolled once, its carried backwards drained at the end), and steady_step
// the time per step of the window run back to back, carried backwards and
// all: the makespan of 2 + n unrolled steps less that of 2, over n.
Result simulate(const schedule::Schedule& schedule, const CostModel& costs);

}  // namespace baton::sim
