// 1f1b (PipeDream-Flush, Narayanan et al. 2021): rank r warms up with
// p - r - 1 forwards, then alternates one forward and one backward, then
// drains the remaining backwards. Same bubble as GPipe, (p - 1) / (m + p - 1),
// but at most p - r micro-batches in flight on rank r.
#include <algorithm>

#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule one_f_one_b(const GeneratorOptions& options) {
  detail::check_options("1f1b", options, 1);
  const int p = options.ranks, m = options.microbatches;
  Schedule s = detail::empty_schedule("1f1b", options, p, StageMap::Loop);
  for (int r = 0; r < p; ++r) {
    auto& list = s.actions[r];
    const int warmup = std::min(p - r - 1, m);
    int next_f = 0, next_b = 0;
    while (next_f < warmup) list.push_back({ActionKind::F, r, next_f++});
    while (next_f < m) {
      list.push_back({ActionKind::F, r, next_f++});
      list.push_back({ActionKind::B, r, next_b++});
    }
    while (next_b < m) list.push_back({ActionKind::B, r, next_b++});
  }
  return s;
}

}  // namespace baton::schedule
