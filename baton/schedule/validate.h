// The validator: proves a schedule complete, correctly ordered, with matching
// communication, and free of deadlock (by a dry run) before anything runs.
//
// Rules, each with its own message:
//  - shape: p >= 1 action lists, stages and micro-batches in range;
//  - completeness: every (stage, micro-batch) has exactly one F and either one
//    B or one I and one W, all on one rank;
//  - communication (lowered schedules): where consecutive stages of a
//    micro-batch sit on different ranks, exactly one SEND on the producer's
//    rank and one RECV on the consumer's; none between stages on one rank;
//  - order and deadlock: a dry run (walk()) must run every action. A rank
//    stuck on an action of its own (B before F, W before I, F of stage 3
//    before stage 2 on the same rank, F before its RECV) is an order error;
//    all ranks stuck on each other is a deadlock.
// A compute-only schedule (no SEND/RECV) is checked as if communication were
// instantaneous and implicit.
#pragma once

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// Throws baton::Error: a first line "[schedule.validate] ..." naming the rule,
// rank, stage and micro-batch, then the grid of actions with the offending
// ones marked.
void validate(const Schedule& schedule);

}  // namespace baton::schedule
