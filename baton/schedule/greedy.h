// A list scheduler shared by the zero-bubble, Chimera and v-half generators. It plays
// the step with unit costs (every F, I, W or B takes one time unit and
// communication is free) and, each time unit, gives every rank the ready
// action of highest priority:
//   1. an input backward (I, or B when the backward is not split) whose
//      output gradient is there, lowest micro-batch first;
//   2. a forward whose input is there, if the rank's memory limits allow it;
//   3. a deferred weight backward (W), lowest micro-batch first.
// The order each rank ran its actions in is the schedule. Because the play
// respects every dependency, the result always passes validate().
#pragma once

#include <functional>
#include <vector>

#include "baton/schedule/action.h"

namespace baton::schedule::detail {

struct GreedyPlan {
  int ranks = 1;
  int stages = 1;
  int microbatches = 1;
  bool split_backward = true;  // I + W per (stage, micro-batch); else one B
  // The rank that runs (stage, micro-batch); must be defined for all of them.
  std::function<int(int stage, int microbatch)> rank_of;
  // Per rank: most stage chunks at once that have run (or, for a micro-batch
  // the rank has let in, will run) a forward and not yet their input
  // backward. A micro-batch is let in, at its first forward on the rank, only
  // if all its chunks there fit, so its later forwards are never held back.
  std::vector<int> inflight_limit;
  // Per rank: the same count up to the weight backward (the weight stash);
  // 0 = no limit.
  std::vector<int> stash_limit;
  // Among ready forwards: true = highest stage first (drain towards the
  // loss), false = lowest micro-batch first.
  bool forward_prefers_later_stage = false;
};

// REQUIRES: limits >= 1 (or 0 for no stash limit), one per rank.
// Returns actions[rank] in the order played.
std::vector<std::vector<Action>> greedy_order(const GreedyPlan& plan);

// A plan of one stage per rank (stage r on rank r), split backwards and no
// limits yet: the zero-bubble H1 and H2 schedules' shape.
GreedyPlan one_stage_per_rank(int ranks, int microbatches);

}  // namespace baton::schedule::detail
