#include "baton/schedule/lower.h"

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {

Schedule lower(const Schedule& schedule) {
  BATON_CHECK(!schedule.has_communication(), "[schedule.lower] schedule \"", schedule.name,
              "\" already has SEND/RECV actions; lower a compute-only schedule");
  validate(schedule);
  const Placement placement(schedule);
  const int S = schedule.stages;
  size_t crossings = 0;
  for (int s = 0; s + 1 < S; ++s)
    for (int mb = 0; mb < schedule.microbatches; ++mb)
      crossings += placement.rank_of(s, mb) != placement.rank_of(s + 1, mb);
  const size_t lowered = schedule.action_count() + 4 * crossings;
  BATON_CHECK(lowered <= kMaxActions, "[schedule.lower] schedule \"", printable(schedule.name),
              "\" has ", schedule.action_count(), " actions and would have ", lowered,
              " with its communication, more than the limit of ", kMaxActions);
  Schedule out = schedule;
  for (int r = 0; r < schedule.ranks; ++r) {
    std::vector<Action>& list = out.actions[r];
    list.clear();
    for (const Action& a : schedule.actions[r]) {
      if (is_reduction(a.kind)) {  // rank-local; its number is a bucket
        list.push_back(a);
        continue;
      }
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
