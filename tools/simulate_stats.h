// The fast path of `baton simulate --json`: when nothing is drawn, printed or
// traced, the statistics come from the stats-only simulator
// (baton/sim/stream_stats.h), which builds no Timeline, no lowered schedule,
// and for closed-form schedules no Schedule at all.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "baton/schedule/generator.h"
#include "baton/sim/simulator.h"

namespace baton::cli {

struct UniformCosts {
  double tf = 1, tb = 2, tw = 1, comm = 0;
};

// What `--json` prints about a simulated schedule besides its statistics.
struct SimulatedShape {
  std::string name;
  int ranks = 1, microbatches = 1, stages = 1, stages_per_rank = 1;
  schedule::StageMap map = schedule::StageMap::Loop;
  size_t actions = 0;  // of the lowered schedule
};

// The grid's figures: dp and tp, buckets per stage and tp time per action.
struct SimulatedGrid {
  int dp = 1, tp = 1;
  int buckets_per_stage = 1;
  double tp_comm_per_action = 0;
};

// The one JSON object `baton simulate --json` prints, from either path. A
// statistic the stats-only path leaves empty (reductions) prints as zeros.
nlohmann::json simulate_json(const SimulatedShape& shape, const sim::Stats& stats,
                             const SimulatedGrid& grid);

struct StatsOnly {
  SimulatedShape shape;
  sim::Stats stats;
};

// The fast path's simulation of a generated schedule.
StatsOnly simulate_stats_only(const std::string& schedule,
                              const schedule::GeneratorOptions& options, const UniformCosts& costs);

}  // namespace baton::cli
