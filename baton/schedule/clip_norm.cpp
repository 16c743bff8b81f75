#include "baton/schedule/clip_norm.h"

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {

Schedule add_clip_norm(const Schedule& schedule) {
  BATON_CHECK(!schedule.has_clip_norm(), "[schedule.clip] schedule \"", printable(schedule.name),
              "\" already has CLIP_NORM actions");
  validate(schedule);
  BATON_CHECK(!schedule.forward_only, "[schedule.clip] schedule \"", printable(schedule.name),
              "\" is forward-only: it makes no gradients to clip");
  BATON_CHECK(!schedule.carries, "[schedule.clip] schedule \"", printable(schedule.name),
              "\" has no flush between steps (it applies gradients as they come), so no point "
              "where a step's gradients are whole to clip by their norm; use a schedule with a "
              "flush, or no --clip-grad-norm");
  BATON_CHECK(schedule.action_count() + static_cast<size_t>(schedule.ranks) <= kMaxActions,
              "[schedule.clip] schedule \"", printable(schedule.name), "\" would have more than ",
              kMaxActions, " actions with its CLIP_NORMs");
  Schedule out = schedule;
  for (int r = 0; r < schedule.ranks; ++r) {
    int lowest = -1;
    for (const Action& a : schedule.actions[r])
      if (is_compute(a.kind) && (lowest < 0 || a.stage < lowest)) lowest = a.stage;
    out.actions[r].push_back({ActionKind::CLIP_NORM, lowest < 0 ? 0 : lowest, 0});
  }
  validate(out);
  return out;
}

}  // namespace baton::schedule
