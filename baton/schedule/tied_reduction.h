// Tied gradient copies in the schedule: the lowering pass that places
// REDUCE_TIED actions.
//
// Within one pipeline (one dp replica), a parameter can live in several
// copies whose gradients must be summed before the optimizer step:
//  - a tied weight: a GPT's token embedding and its LM head hold one matrix;
//    when they sit on different stages, each stage keeps a copy (Megatron-LM,
//    DeepSpeed's TiedLayerSpec);
//  - a replicated stage: Chimera runs every stage on two ranks, one copy each.
// Stages joined by either relation form a tie group, named by its lowest
// stage. Every (rank, stage) of a group ends its rank's step with one
// REDUCE_TIED of that group: the executor sums the copies' gradients over the
// group's ranks (after the step's REDUCE_GRADs, so dp averaging and the copy
// sum compose) and writes the sum into every copy, so the copies stay
// identical; the simulator charges the exchange once the last member is there.
#pragma once

#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// The tie group of each stage: its lowest stage joined with it through
// `tied` (sets of stages holding copies of one tied weight) or through a
// replicated stage (computed on several ranks); -1 for a stage in no group.
// REQUIRES (throws otherwise): every stage in `tied` in 0..stages-1.
std::vector<int> tie_groups(const Schedule& schedule, const std::vector<std::vector<int>>& tied);

// Returns `schedule` with a REDUCE_TIED at the end of each rank's list for
// every stage of a tie group that the rank computes (ascending stages). A
// schedule without tied weights or replicated stages comes back unchanged.
// REQUIRES (throws otherwise): `schedule` valid, without REDUCE_TIED, with a
// flush (not Schedule::carries) when it has any group, and not forward-only.
Schedule add_tied_reductions(const Schedule& schedule,
                             const std::vector<std::vector<int>>& tied = {});

}  // namespace baton::schedule
