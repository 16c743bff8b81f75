// The delay of each stage in a schedule whose stages update their weights
// after every backward (pipedream, async, pipemare: runtime/weight_versions.h):
// how many updates of the stage run between a micro-batch's forward and its
// backward there. PipeMare's learning-rate warm-up and discrepancy correction
// (runtime/pipemare.h) scale with it; it is read off the order, not assumed.
#pragma once

#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// delays[stage]: over the stage's micro-batches, the most B actions of that
// stage that its rank runs after the micro-batch's F and before its B. A
// window without a flush (Schedule::carries) repeats from step to step, so a
// carried B (listed before its F) counts the stage's B's after the F to the
// window's end and those before the B: the steady state, not the first step
// (which skips the carried actions). 1F1B without a flush (2bw, pipedream,
// async, pipemare) gives p - 1 - r on rank r: its window is F(j),
// B(j - (p - 1 - r)). Only B counts as an update; a stage with a split
// backward (I, W) or no backward has delay 0.
// REQUIRES: `schedule` is valid (validate()).
std::vector<int> update_delays(const Schedule& schedule);

}  // namespace baton::schedule
