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
  for (const Skip& skip : schedule.skips)
    for (int mb = 0; mb < schedule.microbatches; ++mb)
      crossings += placement.rank_of(skip.from, mb) != placement.rank_of(skip.to, mb);
  const size_t lowered = schedule.action_count() + 4 * crossings;
  BATON_CHECK(lowered <= kMaxActions, "[schedule.lower] schedule \"", printable(schedule.name),
              "\" has ", schedule.action_count(), " actions and would have ", lowered,
              " with its communication, more than the limit of ", kMaxActions);
  Schedule out = schedule;
  for (int r = 0; r < schedule.ranks; ++r) {
    std::vector<Action>& list = out.actions[r];
    list.clear();
    for (const Action& a : schedule.actions[r]) {
      if (is_step_action(a.kind)) {  // rank-local; its number is a bucket, a group or 0
        list.push_back(a);
        continue;
      }
      const int s = a.stage, mb = a.microbatch;
      const bool from_prev = s > 0 && placement.rank_of(s - 1, mb) != r;
      const bool from_next = s + 1 < S && placement.rank_of(s + 1, mb) != r;
      // A skip's transfers beside the boundary's: received before the
      // consumer's F, sent after the producer's; its gradient likewise back.
      auto skips = [&](ActionKind kind, bool producer) {
        for (int k = 0; k < static_cast<int>(schedule.skips.size()); ++k) {
          const Skip& skip = schedule.skips[k];
          if ((producer ? skip.from : skip.to) != s) continue;
          const int other = placement.rank_of(producer ? skip.to : skip.from, mb);
          if (other != r) list.push_back({kind, s, mb, k});
        }
      };
      if (a.kind == ActionKind::F) {
        if (from_prev) list.push_back({ActionKind::RECV_F, s, mb});
        skips(ActionKind::RECV_F, /*producer=*/false);
        list.push_back(a);
        if (from_next) list.push_back({ActionKind::SEND_F, s, mb});
        skips(ActionKind::SEND_F, /*producer=*/true);
      } else if (is_input_backward(a.kind)) {
        if (from_next) list.push_back({ActionKind::RECV_B, s, mb});
        skips(ActionKind::RECV_B, /*producer=*/true);
        list.push_back(a);
        if (from_prev) list.push_back({ActionKind::SEND_B, s, mb});
        skips(ActionKind::SEND_B, /*producer=*/false);
      } else {
        list.push_back(a);
      }
    }
  }
  validate(out);
  return out;
}

Schedule with_skips(const Schedule& lowered, std::vector<Skip> skips) {
  if (lowered.skips == skips) return lowered;
  BATON_CHECK(lowered.skips.empty(), "[schedule.lower] schedule \"", printable(lowered.name),
              "\" declares ", lowered.skips.size(),
              " skip connections that are not the model's (the model's stashes and pops decide "
              "them; leave them out of the file)");
  Schedule out = lowered;
  for (auto& list : out.actions) {
    std::vector<Action> kept;
    for (const Action& a : list)
      if (!is_communication(a.kind)) kept.push_back(a);
    list = std::move(kept);
  }
  out.skips = std::move(skips);
  return lower(out);
}

}  // namespace baton::schedule
