// The fast path of `baton simulate --json`: when nothing is drawn, printed or
// traced, the statistics come from the stats-only simulator
// (baton/sim/stream_stats.h), which builds no Timeline, no lowered schedule,
// and for closed-form schedules no Schedule at all.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "baton/schedule/generator.h"

namespace baton::cli {

struct UniformCosts {
  double tf = 1, tb = 2, tw = 1, comm = 0;
};

// The same JSON object as the full path, for a generated schedule.
nlohmann::json simulate_stats_json(const std::string& schedule,
                                   const schedule::GeneratorOptions& options,
                                   const UniformCosts& costs);

}  // namespace baton::cli
