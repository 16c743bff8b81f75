// Lowering: inserts the communication a compute-only schedule needs. Where a
// stage's input comes from a stage on another rank, a RECV goes right before
// the action that consumes it and a SEND right after the action that makes it;
// stages on the same rank (ZB-V's turn, interleaved chunks that meet) exchange
// tensors directly, with no communication action. A skip connection across
// stages (Schedule::skips) goes likewise, from the stashing stage's rank
// straight to the popping stage's: "0SEND_F3@0" after the stash's F,
// "3RECV_F3@0" before the pop's, and its gradient back the same way.
#pragma once

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// REQUIRES: `schedule` has no communication actions (throws otherwise).
// The result is validated; an invalid input throws validate()'s error.
Schedule lower(const Schedule& schedule);

// `lowered` with `skips` (its communication made again): a model's skip
// connections, known once its layers are cut into stages. Throws
// baton::Error when `lowered` declares other skips (a schedule file's), or
// validate()'s error (a schedule without a flush).
Schedule with_skips(const Schedule& lowered, std::vector<Skip> skips);

}  // namespace baton::schedule
