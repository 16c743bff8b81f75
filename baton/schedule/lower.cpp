#include "baton/schedule/lower.h"

#include "baton/core/error.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {

Schedule lower(const Schedule& schedule) {
  BATON_CHECK(!schedule.has_communication(), "[schedule.lower] schedule \"", schedule.name,
              "\" already has SEND/RECV actions; lower a compute-only schedule");
  validate(schedule);
  const Placement placement(schedule);
  Schedule out = schedule;
  const int S = schedule.stages;
  for (int r = 0; r < schedule.ranks; ++r) {
    std::vector<Action>& list = out.actions[r];
    list.clear();
    for (const Action& a : schedule.actions[r]) {
      const int s = a.stage, mb = a.microbatch;
      const bool from_prev = s > 0 && placement.rank_of(s - 1, mb) != r;
      const bool from_next = s + 1 < S && placement.rank_of(s + 1, mb) != r;
      if (a.kind == ActionKind::F) {
        if (from_prev) list.push_back({ActionKind::RECV_F, s, mb});
        list.push_back(a);
        if (from_next) list.push_back({ActionKind::SEND_F, s, mb});
      } else if (is_input_backward(a.kind)) {
        if (from_next) list.push_back({ActionKind::RECV_B, s, mb});
        list.push_back(a);
        if (from_prev) list.push_back({ActionKind::SEND_B, s, mb});
      } else {
        list.push_back(a);
      }
    }
  }
  validate(out);
  return out;
}

}  // namespace baton::schedule
