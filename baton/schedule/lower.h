// Lowering: inserts the communication a compute-only schedule needs. Where a
// stage's input comes from a stage on another rank, a RECV goes right before
// the action that consumes it and a SEND right after the action that makes it;
// stages on the same rank (ZB-V's turn, interleaved chunks that meet) exchange
// tensors directly, with no communication action.
#pragma once

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// REQUIRES: `schedule` has no communication actions (throws otherwise).
// The result is validated; an invalid input throws validate()'s error.
Schedule lower(const Schedule& schedule);

}  // namespace baton::schedule
