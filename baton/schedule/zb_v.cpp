// zb-v (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", section 6): two
// stage chunks per rank in a V (rank r holds stages r and 2p - 1 - r, so the
// loss sits on rank 0's second chunk), backward split into I and W. The order
// per rank, with c0 = stage r and c1 = stage 2p - 1 - r:
//   warm-up:   2(p - r) - 1 forwards of c0; r pairs (F c1, F c0); p - r
//              triples (F c1, I c1, W c1);
//   steady:    (F c0, I c0, W c0, F c1, I c1, W c1) until every forward ran;
//   cool-down: r pairs (I c0, I c1); p - r pairs (I c0, W c0); remaining Ws.
// With equal chunk costs (F = I = W) it has no idle time inside any rank's
// span once m >= 2p - 1, holds at most 2p chunk forwards (1F1B's peak
// activation memory, in half-size chunks) on every rank, and runs each W
// right after its I in the steady phase, so the weight stash stays as small.
// For m < 2p - 1 it is the schedule for 2p - 1 micro-batches with the missing
// ones left out: valid, with a larger bubble.
#include <algorithm>

#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule zb_v(const GeneratorOptions& options) {
  detail::check_options("zb-v", options, 2, {2});
  const int p = options.ranks, m = options.microbatches;
  Schedule s = detail::empty_schedule("zb-v", options, 2 * p, StageMap::V);
  const int n = std::max(2 * p - 1, m);  // micro-batches the pattern is laid out for
  for (int r = 0; r < p; ++r) {
    const int c0 = r, c1 = 2 * p - 1 - r;
    int f0 = 0, f1 = 0, i0 = 0, i1 = 0;
    std::vector<Action> ops;
    auto add = [&ops](ActionKind kind, int stage, int mb) { ops.push_back({kind, stage, mb}); };
    for (int k = 0; k < 2 * (p - r) - 1; ++k) add(ActionKind::F, c0, f0++);
    for (int k = 0; k < r; ++k) {
      add(ActionKind::F, c1, f1++);
      add(ActionKind::F, c0, f0++);
    }
    for (int k = 0; k < p - r; ++k) {
      add(ActionKind::F, c1, f1++);
      add(ActionKind::I, c1, i1);
      add(ActionKind::W, c1, i1++);
    }
    while (f1 < f0 || f0 < n) {
      if (f0 < n) add(ActionKind::F, c0, f0++);
      add(ActionKind::I, c0, i0);
      add(ActionKind::W, c0, i0++);
      add(ActionKind::F, c1, f1++);
      add(ActionKind::I, c1, i1);
      add(ActionKind::W, c1, i1++);
    }
    int w0 = i0, w1 = i1;
    for (int k = 0; k < r; ++k) {
      add(ActionKind::I, c0, i0++);
      add(ActionKind::I, c1, i1++);
    }
    for (int k = 0; k < p - r; ++k) {
      add(ActionKind::I, c0, i0++);
      add(ActionKind::W, c0, w0++);
    }
    while (w1 < i1) add(ActionKind::W, c1, w1++);
    while (w0 < i0) add(ActionKind::W, c0, w0++);
    for (const Action& a : ops)
      if (a.microbatch < m) s.actions[r].push_back(a);
  }
  return s;
}

}  // namespace baton::schedule
