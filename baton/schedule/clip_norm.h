// Global-norm gradient clipping in the schedule: the pass that places
// CLIP_NORM actions.
//
// Clipping by the global norm (Megatron-LM's and DeepSpeed's default; what
// torch.nn.utils.clip_grad_norm_ does on one device) needs the norm of every
// gradient of the model, which no rank holds: each has its stages, its tp
// slices, its share of the replicas. So every rank ends its step with one
// CLIP_NORM, after its REDUCE_GRADs and REDUCE_TIEDs (the gradients are then
// final): the executor sums each rank's share of the squared norm over the
// world (runtime/clip.h says which gradients count, so that each is counted
// once) and scales the rank's gradients by min(1, max / (norm + 1e-6)). The
// simulator charges the all-reduce once the last rank is there.
#pragma once

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// Returns `schedule` with a CLIP_NORM at the end of each rank's list, named
// by the lowest stage the rank computes (0 when it computes none).
// REQUIRES (throws otherwise): `schedule` valid, without CLIP_NORM, with a
// flush (not Schedule::carries: 2bw, pipedream and async apply gradients with
// no point where the step's are whole) and not forward-only.
Schedule add_clip_norm(const Schedule& schedule);

}  // namespace baton::schedule
