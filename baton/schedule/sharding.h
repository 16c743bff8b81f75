// ZeRO in the schedule: the lowering pass that places UNSHARD, RESHARD and
// REDUCE_SCATTER (action.h), so sharded data parallelism is validated,
// simulated and executed like every other action.
//
// Each stage's parameters are sharded over its dp group (runtime/zero.h):
// replica d keeps elements [d c, (d + 1) c) of each parameter, c = ceil(n /
// dp). By ZeRO stage:
//  - 1: the optimizer steps the shards. The stage's gradients are all-reduced
//    (REDUCE_GRAD) and an UNSHARD all-gathers the shards the other replicas
//    stepped before the stage's first compute of the next step.
//  - 2: as 1, but each REDUCE_GRAD becomes a REDUCE_SCATTER: a replica keeps
//    only its shard of the gradients once the stage's backwards are done.
//  - 3: as 2, and the gathered parameters are freed after the stage's last
//    backward of the step (RESHARD): between steps a replica holds 1/dp of
//    the weights. A stage stays gathered across all of its micro-batches in
//    a step (torchtitan's default): one all-gather per stage and step, the
//    traffic of ZeRO-1's, at the memory of the stage's whole weights from
//    its UNSHARD to its RESHARD. (Resharding between micro-batches would
//    gather them 2m times a step, for forward and backward, to hold them only
//    while a micro-batch computes; baton does not offer it.)
// UNSHARD goes before the compute action that precedes the stage's first
// compute on the rank (or first in the list when there is none), so its
// all-gather overlaps that action: the executor waits for it only at the
// stage's first compute. RESHARD goes right after the stage's last weight
// backward (B or W), after the SEND_B and the stage's gradient reductions
// that follow it, if any.
#pragma once

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// ZeRO stages baton runs: 0 (off) to 3.
inline constexpr int kMaxZeroStage = 3;

// Returns `schedule` with ZeRO stage `zero`'s actions (above). zero 0, or a
// schedule without gradient reductions (dp = 1): unchanged. A schedule that
// already has UNSHARD or RESHARD (a file's) keeps them and gets none added;
// its REDUCE_GRADs still become REDUCE_SCATTERs for zero >= 2. The result is
// validated.
// REQUIRES (throws otherwise): 0 <= zero <= 3; `schedule` valid, with a
// flush (not Schedule::carries) when zero > 0 and it has gradient reductions.
// `prefetch` off puts each UNSHARD right before the stage's first compute
// (nothing overlaps its all-gather), to measure what the prefetch hides.
Schedule add_sharding(const Schedule& schedule, int zero, bool prefetch = true);

}  // namespace baton::schedule
