// v-half (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS
// 2024): a V-shaped schedule (two stage chunks per rank, rank r holding stages
// r and 2p - 1 - r, backward split into I and W) with about half of 1F1B's
// activation memory: the paper's (p + 2) / 2 micro-batches' worth of a full
// stage per rank, against 1F1B's p, i.e. p + 2 half-size chunks.
//
// Construction: baton's list scheduler (greedy.h) plays the V with unit costs
// under that cap, counting a chunk from its F until its W: a rank lets a
// micro-batch in only while both its chunks there fit, then prefers input
// backwards, then forwards, then weight backwards. The paper reaches the same
// memory by repeating a building block whose lifespans add up to about half
// of 1F1B's; a greedy play under the cap gives the memory bound by
// construction and, with F = I = W per chunk, a step that exceeds the work by
// about half of 1F1B's bubble (less than v-min's, more than zb-v's). Defined
// for every p and m >= 1.
#include "baton/schedule/generator.h"
#include "baton/schedule/greedy.h"

namespace baton::schedule {

int v_half_peak_chunks(int ranks) {
  return ranks + 2;
}

Schedule v_half(const GeneratorOptions& options) {
  detail::check_options("v-half", options, 2, {2});
  const int p = options.ranks;
  detail::GreedyPlan plan;
  plan.ranks = p;
  plan.stages = 2 * p;
  plan.microbatches = options.microbatches;
  plan.split_backward = true;
  plan.rank_of = [p](int stage, int) { return stage < p ? stage : 2 * p - 1 - stage; };
  plan.inflight_limit.assign(p, v_half_peak_chunks(p));
  plan.stash_limit.assign(p, v_half_peak_chunks(p));
  Schedule s = detail::empty_schedule("v-half", options, 2 * p, StageMap::V);
  s.actions = detail::greedy_order(plan);
  return s;
}

}  // namespace baton::schedule
