// The measured timeline of the last step: gathered from every rank, written
// by rank 0 as --trace (Chrome trace) and --svg, and set against the
// simulator's prediction with --compare-sim.
#pragma once

#include "baton/comm/p2p_probe.h"
#include "baton/pipeline/pipeline.h"
#include "baton/train/config.h"

namespace baton::train {

// Collective: every rank calls it after the last step. `link` is what
// comm::measure_p2p_cost probed (used only with --compare-sim).
void write_timelines(const TrainConfig& config, const Pipeline& pipeline,
                     const comm::P2pCost& link);

}  // namespace baton::train
