#include "baton/schedule/unroll.h"

#include <cstdint>

#include "baton/core/error.h"
#include "baton/schedule/limits.h"

namespace baton::schedule {
namespace {

bool is_backward_side(ActionKind kind) {
  return kind == ActionKind::B || kind == ActionKind::I || kind == ActionKind::W ||
         kind == ActionKind::RECV_B || kind == ActionKind::SEND_B;
}

}  // namespace

std::vector<std::vector<bool>> carried_actions(const Schedule& schedule) {
  std::vector<std::vector<bool>> carried(schedule.actions.size());
  const size_t cells = static_cast<size_t>(schedule.stages) * schedule.microbatches;
  for (size_t r = 0; r < schedule.actions.size(); ++r) {
    const auto& list = schedule.actions[r];
    carried[r].assign(list.size(), false);
    if (!schedule.carries) continue;
    std::vector<bool> forwarded(cells, false);  // F of (stage, mb) seen so far on this rank
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (is_step_action(a.kind)) continue;
      const size_t cell = static_cast<size_t>(a.stage) * schedule.microbatches + a.microbatch;
      if (cell >= cells) continue;  // out of range: validate()'s shape rule names it
      if (a.kind == ActionKind::F)
        forwarded[cell] = true;
      else if (is_backward_side(a.kind))
        carried[r][i] = !forwarded[cell];
    }
  }
  return carried;
}

Schedule unroll(const Schedule& window, int steps) {
  BATON_CHECK(steps >= 1, "[schedule.unroll] steps must be at least 1, got ", steps);
  BATON_CHECK(!window.has_grad_reductions(), "[schedule.unroll] schedule \"", window.name,
              "\" has no flush between steps and REDUCE_GRAD actions; data parallelism needs a "
              "flush (a step's gradients must be whole before they are reduced)");
  const uint64_t total = static_cast<uint64_t>(window.microbatches) * steps;
  BATON_CHECK(total <= static_cast<uint64_t>(kMaxMicrobatches) &&
                  window.action_count() * static_cast<uint64_t>(steps + 1) <= kMaxActions,
              "[schedule.unroll] ", steps, " steps of schedule \"", window.name,
              "\" exceed the limits on micro-batches or actions");
  const auto carried = carried_actions(window);
  Schedule out = window;
  out.carries = false;
  out.microbatches = static_cast<int>(total);
  const int m = window.microbatches;
  for (size_t r = 0; r < window.actions.size(); ++r) {
    auto& list = out.actions[r];
    list.clear();
    const auto& in = window.actions[r];
    for (int k = 0; k <= steps; ++k) {
      for (size_t i = 0; i < in.size(); ++i) {
        Action a = in[i];
        if (carried[r][i]) {
          if (k == 0) continue;
          a.microbatch += (k - 1) * m;
        } else {
          if (k == steps) continue;  // the drain runs only what is carried
          a.microbatch += k * m;
        }
        list.push_back(a);
      }
    }
  }
  return out;
}

}  // namespace baton::schedule
