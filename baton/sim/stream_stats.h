// The stats-only simulator: the same times and statistics as simulate()
// (simulator.h), without a Timeline and without a lowered Schedule. It reads
// the compute actions from an ActionSource, charges a transfer wherever a
// stage's input comes from another rank (as the RECV of a lowered schedule
// would), and keeps only two times per (stage, micro-batch) and a few figures
// per rank. `baton simulate --json` (with nothing to draw) and the planner
// use it.
#pragma once

#include "baton/sim/action_source.h"
#include "baton/sim/cost_model.h"
#include "baton/sim/simulator.h"

namespace baton::sim {

// REQUIRES: one StageCost per stage of `source`; a schedule that can run to
// the end (one that validate() passes). Throws baton::Error for bad costs (as
// simulate() does) or a schedule that cannot run to its end.
Stats simulate_stats(const ActionSource& source, const CostModel& costs);

// uniform_cost_model() for a source: costs per rank split over its chunks.
CostModel uniform_cost_model(const ActionSource& source, double tf, double tb, double tw,
                             double comm = 0);

}  // namespace baton::sim
