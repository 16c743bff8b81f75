// Runs a schedule's actions in an order that respects every dependency, as the
// ranks would: each rank in its own order, sends never block, a receive waits
// for its send, a compute action waits for its inputs. The validator uses it
// as the deadlock dry run; the simulator attaches times to the same walk.
//
// In a schedule without communication actions (compute only), an input made
// on another rank counts as available when the producing action has run.
#pragma once

#include <functional>
#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// What an action waits for: the action that must run first, on which rank.
struct Wait {
  Action needs;
  int rank = -1;
};

struct WalkResult {
  bool complete = false;
  // next[r]: index of the first action of rank r that did not run.
  std::vector<size_t> next;
  // For ranks that stopped early: what their next action waits for.
  std::vector<Wait> waits;
};

// Called as each action runs. `producer_rank` is the rank of the action whose
// output it consumes across ranks (RECV: the sender; compute in a compute-only
// schedule: the producing compute), or -1.
using WalkVisitor = std::function<void(int rank, size_t index, int producer_rank)>;

// REQUIRES: stages and micro-batches in range; placement built from `schedule`.
WalkResult walk(const Schedule& schedule, const Placement& placement,
                const WalkVisitor& visit = {});

}  // namespace baton::schedule
