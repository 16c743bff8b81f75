// chimera (Li & Hoefler 2021): two 1F1B-style pipelines run in opposite
// directions over the same p ranks, each rank holding stage r for the "down"
// pipe and stage p - 1 - r for the "up" pipe, so one pipe's warm-up fills the
// other's bubble. Micro-batches are split in groups of p: within each group
// the first p/2 go down (stage s on rank s), the rest up (stage s on rank
// p - 1 - s); a last partial group fills the down half first. p must be even
// (p = 1 is a single down pipe). Any m >= 1 is accepted; the paper's bubble
// ratio (p - 2) / (p - 2 + 2m) holds for m a multiple of p with forward and
// backward of equal cost (tf = tb). The backward is not split (B actions).
//
// The order is found by detail::greedy_order with at most p micro-batches in
// flight per rank (1F1B's peak on rank 0) and forwards nearest the loss first.
// It is tuned for tf = tb: with tb = 2 tf it beats 1F1B for m <= 2p but not
// for m = 4p, where the paper's forward doubling would be needed.
#include <algorithm>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/greedy.h"

namespace baton::schedule {

Schedule chimera(const GeneratorOptions& options) {
  detail::check_options("chimera", options, 1);
  const int p = options.ranks, m = options.microbatches;
  BATON_CHECK(p == 1 || p % 2 == 0,
              "[schedule.chimera] needs an even pp (two pipes of p/2 "
              "micro-batches each per group), got pp=",
              p);
  Schedule s = detail::empty_schedule("chimera", options, p, StageMap::Bidirectional);
  detail::GreedyPlan plan;
  plan.ranks = p;
  plan.stages = p;
  plan.microbatches = m;
  plan.split_backward = false;
  plan.forward_prefers_later_stage = true;
  const int down = std::max(1, p / 2);
  plan.rank_of = [p, down](int stage, int mb) { return mb % p < down ? stage : p - 1 - stage; };
  plan.inflight_limit.assign(p, p);
  plan.stash_limit.assign(p, 0);
  s.actions = detail::greedy_order(plan);
  return s;
}

}  // namespace baton::schedule
