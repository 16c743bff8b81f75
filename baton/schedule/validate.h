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
//  - gradient reductions (REDUCE_GRAD, if any): each on a rank that computes
//    its stage, after that stage's last B or W there, each bucket once; every
//    stage on every rank reduced in buckets 0..n-1, with the same n on every
//    rank holding the stage;
//  - tied reductions (REDUCE_TIED, if any): each on a rank that computes its
//    stage, once per (rank, stage), after all of the rank's other actions,
//    and one group per stage;
//  - order and deadlock: a dry run (walk()) must run every action. A rank
//    stuck on an action of its own (B before F, W before I, F of stage 3
//    before stage 2 on the same rank, F before its RECV) is an order error;
//    all ranks stuck on each other is a deadlock.
// A compute-only schedule (no SEND/RECV) is checked as if communication were
// instantaneous and implicit.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "baton/core/error.h"
#include "baton/schedule/schedule.h"

namespace baton::schedule {

// What validate() throws. what() is the whole message; rule() its first line
// without the "[schedule.validate] " prefix; marks() the (rank, index) of the
// actions it points at, so that a file reader can name their lines and columns.
class ValidationError : public Error {
 public:
  ValidationError(std::string rule, std::vector<std::pair<int, size_t>> marks,
                  const std::string& message)
      : Error(message), rule_(std::move(rule)), marks_(std::move(marks)) {}
  const std::string& rule() const { return rule_; }
  const std::vector<std::pair<int, size_t>>& marks() const { return marks_; }

 private:
  std::string rule_;
  std::vector<std::pair<int, size_t>> marks_;
};

// Throws ValidationError: a first line "[schedule.validate] ..." naming the rule,
// rank, stage and micro-batch, then the grid of actions with the offending
// ones marked.
void validate(const Schedule& schedule);

}  // namespace baton::schedule
