// Schedules without a flush (Schedule::carries, PipeDream-2BW): which actions
// of a window are carried over from the previous step, and the window unrolled
// into one ordinary schedule over several steps, which validate() and the
// simulator check and time like any other.
#pragma once

#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// carried[rank][index]: whether the action belongs to the previous step's
// micro-batch (a B, I, W, RECV_B or SEND_B listed before the rank's F of its
// (stage, micro-batch)). All false unless schedule.carries.
std::vector<std::vector<bool>> carried_actions(const Schedule& schedule);

// The window run `steps` times back to back, then drained: micro-batch j of
// step k becomes k * m + j; step 0 runs no carried actions, and a final drain
// runs the carried actions of step `steps` (the last step's micro-batches'
// remaining backwards). The result has steps * m micro-batches and carries
// nothing; REDUCE_GRAD actions are not allowed in a window (throws).
// REQUIRES: steps >= 1.
Schedule unroll(const Schedule& window, int steps);

}  // namespace baton::schedule
