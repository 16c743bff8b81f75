#include "baton/schedule/sharding.h"

#include <map>
#include <vector>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {

Schedule add_sharding(const Schedule& schedule, int zero, bool prefetch) {
  BATON_CHECK(zero >= 0 && zero <= kMaxZeroStage, "[schedule.sharding] zero must be 0 to ",
              kMaxZeroStage, ", got ", zero);
  validate(schedule);
  if (zero == 0 || !schedule.has_grad_reductions()) return schedule;
  BATON_CHECK(!schedule.carries, "[schedule.sharding] schedule \"", printable(schedule.name),
              "\" has no flush between steps; ZeRO needs a schedule with a flush");
  Schedule out = schedule;
  if (zero >= 2) {
    for (auto& list : out.actions)
      for (Action& a : list)
        if (a.kind == ActionKind::REDUCE_GRAD) a.kind = ActionKind::REDUCE_SCATTER;
  }
  if (schedule.has_sharding()) {
    validate(out);
    return out;
  }
  size_t added = 0;
  for (int r = 0; r < out.ranks; ++r) {
    const std::vector<Action> list = out.actions[r];
    // Per stage computed here: where its first compute is, where the compute
    // before that is (the UNSHARD's place), and its last weight backward.
    std::map<int, size_t> first, last;
    long previous = -1;  // the last compute seen
    std::map<int, long> before_first;
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_compute(a.kind)) continue;
      if (!first.count(a.stage)) {
        first[a.stage] = i;
        before_first[a.stage] = previous;
      }
      if (is_weight_backward(a.kind) || !last.count(a.stage)) last[a.stage] = i;
      previous = static_cast<long>(i);
    }
    added += first.size() * (zero == 3 ? 2 : 1);
    BATON_CHECK(schedule.action_count() + added <= kMaxActions, "[schedule.sharding] schedule \"",
                printable(schedule.name), "\" would have more than ", kMaxActions,
                " actions with its UNSHARD and RESHARD actions");
    // Where each goes: UNSHARDs before index i, RESHARDs after it.
    std::map<size_t, std::vector<int>> unshard_at, reshard_after;
    for (const auto& [stage, at] : first) {
      const long ahead = prefetch ? before_first[stage] : static_cast<long>(at);
      unshard_at[ahead < 0 ? 0 : static_cast<size_t>(ahead)].push_back(stage);
    }
    if (zero == 3) {
      for (const auto& [stage, at] : last) {
        size_t after = at;
        // The previous stage waits for the SEND_B: it goes first.
        if (after + 1 < list.size() && list[after + 1].kind == ActionKind::SEND_B &&
            list[after + 1].stage == stage && list[after + 1].microbatch == list[at].microbatch)
          ++after;
        // And after the stage's gradient reductions that follow.
        while (after + 1 < list.size() && is_grad_reduction(list[after + 1].kind) &&
               list[after + 1].stage == stage)
          ++after;
        reshard_after[after].push_back(stage);
      }
    }
    std::vector<Action>& into = out.actions[r];
    into.clear();
    for (size_t i = 0; i < list.size(); ++i) {
      if (unshard_at.count(i))
        for (int stage : unshard_at[i]) into.push_back({ActionKind::UNSHARD, stage, 0});
      into.push_back(list[i]);
      if (reshard_after.count(i))
        for (int stage : reshard_after[i]) into.push_back({ActionKind::RESHARD, stage, 0});
    }
  }
  validate(out);
  return out;
}

}  // namespace baton::schedule
