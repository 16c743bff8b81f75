// A Timeline: what each rank ran and when. The simulator predicts one; the
// runtime measures one; the same writers draw both (grid, SVG, Chrome trace).
#pragma once

#include <string>
#include <vector>

#include "baton/schedule/action.h"

namespace baton::trace {

struct Event {
  int rank = 0;
  int stage = 0;
  int microbatch = 0;
  schedule::ActionKind kind = schedule::ActionKind::F;
  double start = 0;  // in Timeline::time_unit, from the step's start
  double end = 0;
};

// What a rank holds, in bytes, from `time` until its next point (its last:
// until the timeline ends): a step of its memory over time.
struct MemoryPoint {
  int rank = 0;
  double time = 0;
  double bytes = 0;
};

struct Timeline {
  std::string title;      // e.g. "1f1b p=4 m=8 (simulated)"
  std::string time_unit;  // "ms" for measured timelines, "" for cost-model units
  int ranks = 0;
  std::vector<Event> events;  // any order
  // Each rank's memory over the step (`baton simulate --profile`: the memory
  // model's walk, sim/memory_model.h); any order; empty: none drawn.
  std::vector<MemoryPoint> memory;
};

// Time the last event ends (0 for an empty timeline); time starts at 0.
double makespan(const Timeline& timeline);
// Sum of compute event (F, B, I, W) durations on each rank; communication
// and reductions overlap compute and are not busy time.
std::vector<double> busy_time(const Timeline& timeline);
// 1 - busy time summed over ranks / (ranks * makespan); 0 when empty.
double bubble_fraction(const Timeline& timeline);

// A rank's gradient all-reduces in a timeline: `total`, the time REDUCE_GRAD
// events cover (their union); `exposed`, how far the last one ends past the
// rank's last compute event (0 when none ends later), as the simulator's
// Stats::exposed_reduction counts it. Zeros without REDUCE_GRAD events.
struct Reductions {
  double total = 0;
  double exposed = 0;
};
Reductions reductions_of_rank(const std::vector<Event>& events, int rank);

}  // namespace baton::trace
