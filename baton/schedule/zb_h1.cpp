// zb-h1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", handcrafted
// schedule ZB-H1): the backward is split into I (input gradient, on the
// critical path) and W (weight gradient, moved into the bubbles). Rank r keeps
// 1F1B's activation memory, at most p - r micro-batches whose I has not run,
// and lets a W lag its I so that at most 2p - 1 - r micro-batches wait for
// their W. Step time m(F + I + W) + (p - 1)(F + I - W) for m >= p and W <= I,
// against 1F1B's m(F + I + W) + (p - 1)(F + I + W).
//
// The order is found by detail::greedy_order (unit costs, I before F before W).
#include "baton/schedule/generator.h"
#include "baton/schedule/greedy.h"

namespace baton::schedule {

Schedule zb_h1(const GeneratorOptions& options) {
  detail::check_options("zb-h1", options, 1);
  const int p = options.ranks, m = options.microbatches;
  Schedule s = detail::empty_schedule("zb-h1", options, p, StageMap::Loop);
  detail::GreedyPlan plan = detail::one_stage_per_rank(p, m);
  for (int r = 0; r < p; ++r) {
    plan.inflight_limit.push_back(p - r);
    plan.stash_limit.push_back(2 * p - 1 - r);
  }
  s.actions = detail::greedy_order(plan);
  return s;
}

}  // namespace baton::schedule
