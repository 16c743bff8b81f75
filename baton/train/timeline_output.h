// The measured timeline of the last step: gathered from every rank, written
// by rank 0 as --trace (Chrome trace) and --svg, and set against the
// simulator's prediction with --compare-sim.
#pragma once

#include <vector>

#include "baton/comm/p2p_probe.h"
#include "baton/pipeline/pipeline.h"
#include "baton/trace/timeline.h"
#include "baton/train/config.h"

namespace baton::train {

// --compare-sim measures the last this many steps (fewer when the run has
// fewer), each started after a barrier.
inline constexpr int kComparedSteps = 5;

// Collective: the last step's measured timeline, every rank's events on one
// time axis (on every rank).
trace::Timeline gather_step_timeline(const TrainConfig& config, const Pipeline& pipeline);

// --compare-sim's activation figures: each stage's bytes kept per
// micro-batch, measured by the counting allocator on the layers, and rank
// 0's allocator activations at its peak. Empty: the executor's count of the
// stages' inputs, on both sides (no measured layers: tp > 1, a GPU).
struct ComparedActivations {
  std::vector<double> stage_kept;
  double measured = 0;
};

// Collective: every rank calls it after the last step. `link` is what
// comm::measure_p2p_cost probed, `earlier` the timelines of the steps
// compared before the last, `activations` the bytes (all used only with
// --compare-sim).
void write_timelines(const TrainConfig& config, const Pipeline& pipeline, const comm::P2pCost& link,
                     const std::vector<trace::Timeline>& earlier = {},
                     const ComparedActivations& activations = {});

}  // namespace baton::train
