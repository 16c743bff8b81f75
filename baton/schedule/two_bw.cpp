// 2bw (PipeDream-2BW, Narayanan et al., ICML 2021): 1F1B without a flush.
// Rank r runs one forward and one backward in turn, the backward p - r - 1
// micro-batches behind the forward, and the pipeline never drains between
// steps: the last p - r - 1 backwards of a step run on rank r in the next
// step, interleaved with its forwards (Schedule::carries). The steady state
// has no bubble: every rank is busy m (F + B) per step.
//
// Weights are double-buffered (runtime/weight_versions.h): every micro-batch
// of step t runs its forward and backward on the weights of the start of step
// t, and the update after step t applies step t - 1's gradient, so the
// weights are one update stale: W(t+1) = W(t) - lr * grad(W(t-1)).
//
// Rank r's window: for j = 0..m-1, F(j) then B(j - (p - r - 1)), where a
// negative index is micro-batch m + j - (p - r - 1) of the previous step. m
// must be at least p: a carried backward must come before its micro-batch's
// forward in the window (that is what marks it carried), and everything
// carried then comes from the previous step alone (two weight versions
// suffice, as the 2BW paper's m >= p).
#include <algorithm>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

namespace detail {

Schedule no_flush_1f1b(const char* name, const GeneratorOptions& options) {
  check_options(name, options, 1);
  const int p = options.ranks, m = options.microbatches;
  BATON_CHECK(m >= p, "[schedule.", name, "] ", name, " needs at least pp micro-batches (m >= ", p,
              " for pp=", p, "), got m=", m,
              ": rank 0 carries pp - 1 backwards into the next step, each listed before the "
              "forward of its micro-batch there");
  Schedule s = empty_schedule(name, options, p, StageMap::Loop);
  s.carries = true;
  for (int r = 0; r < p; ++r) {
    const int lag = p - r - 1;
    for (int j = 0; j < m; ++j) {
      s.actions[r].push_back({ActionKind::F, r, j});
      s.actions[r].push_back({ActionKind::B, r, (j - lag + m) % m});
    }
  }
  return s;
}

}  // namespace detail

Schedule two_bw(const GeneratorOptions& options) {
  return detail::no_flush_1f1b("2bw", options);
}

}  // namespace baton::schedule
