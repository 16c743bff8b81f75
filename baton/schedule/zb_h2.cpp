// zb-h2 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", handcrafted
// schedule ZB-H2): like zb-h1, but rank r runs extra warm-up forwards, up to
// 2(p - r) - 1 micro-batches whose I has not run (2p - 1 on rank 0), so that
// the first I arrives just as the warm-up ends. Every rank is then busy from
// its first action to its last but for (p - 1)(F + I - 2W) (zero when
// F + I = 2W): the step is a parallelogram. Needs m >= 2p to fill the warm-up.
//
// The order is found by detail::greedy_order (unit costs, I before F before W).
#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/greedy.h"

namespace baton::schedule {

Schedule zb_h2(const GeneratorOptions& options) {
  detail::check_options("zb-h2", options, 1);
  const int p = options.ranks, m = options.microbatches;
  BATON_CHECK(m >= 2 * p,
              "[schedule.zb-h2] needs m >= 2p micro-batches to fill its warm-up "
              "(use zb-h1 for fewer), got m=",
              m, ", p=", p);
  Schedule s = detail::empty_schedule("zb-h2", options, p, StageMap::Loop);
  detail::GreedyPlan plan = detail::one_stage_per_rank(p, m);
  for (int r = 0; r < p; ++r) {
    plan.inflight_limit.push_back(2 * (p - r) - 1);
    plan.stash_limit.push_back(2 * p - 1);
  }
  s.actions = detail::greedy_order(plan);
  return s;
}

}  // namespace baton::schedule
