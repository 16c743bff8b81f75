#include "baton/schedule/update_delays.h"

#include <algorithm>
#include <map>
#include <utility>

namespace baton::schedule {

std::vector<int> update_delays(const Schedule& schedule) {
  std::vector<int> delays(static_cast<size_t>(schedule.stages), 0);
  for (const std::vector<Action>& actions : schedule.actions) {
    std::map<std::pair<int, int>, size_t> forward_at;  // (stage, micro-batch) -> index
    std::map<int, std::vector<size_t>> backwards;      // stage -> its B's indices, ascending
    for (size_t i = 0; i < actions.size(); ++i) {
      const Action& a = actions[i];
      if (a.kind == ActionKind::F) forward_at[{a.stage, a.microbatch}] = i;
      if (a.kind == ActionKind::B) backwards[a.stage].push_back(i);
    }
    for (const auto& entry : backwards) {
      // A named reference, not a structured binding: C++17 lambdas cannot capture those.
      const int stage = entry.first;
      const std::vector<size_t>& at = entry.second;
      // The stage's B's strictly between positions lo and hi.
      auto between = [&at](size_t lo, size_t hi) {
        return static_cast<int>(std::lower_bound(at.begin(), at.end(), hi) -
                                std::upper_bound(at.begin(), at.end(), lo));
      };
      for (size_t b : at) {
        const auto f = forward_at.find({stage, actions[b].microbatch});
        if (f == forward_at.end()) continue;
        const size_t from = f->second;
        // A B listed before its F runs in the next step: count to the end and from the start.
        const int count =
            from < b ? between(from, b)
                     : static_cast<int>(at.end() - std::upper_bound(at.begin(), at.end(), from)) +
                           static_cast<int>(std::lower_bound(at.begin(), at.end(), b) - at.begin());
        int& delay = delays[static_cast<size_t>(stage)];
        delay = std::max(delay, count);
      }
    }
  }
  return delays;
}

}  // namespace baton::schedule
