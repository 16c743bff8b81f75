#include "baton/schedule/greedy.h"

#include <map>
#include <set>
#include <utility>

#include "baton/core/error.h"

namespace baton::schedule::detail {
namespace {

// A priority key: the smallest key is played first. Backwards and weight
// backwards use (micro-batch, -stage); forwards that too, or (-stage,
// micro-batch) when they prefer later stages.
using Key = std::pair<int, int>;

// What each rank may play next, kept up to date as actions run, so that each
// time unit costs O(log n) per rank rather than a scan of every cell.
struct Ready {
  bool stage_first;  // forward keys are (-stage, micro-batch)
  std::set<Key> backward, weight;
  // Forwards of micro-batches the rank has let in, and of those it has not
  // (by the chunks they need there, so one look per size finds the best that fits).
  std::set<Key> forward_entered;
  std::map<int, std::set<Key>> forward_new;

  Key key_b(int stage, int mb) const { return {mb, -stage}; }
  Key key_f(int stage, int mb) const { return stage_first ? Key{-stage, mb} : Key{mb, -stage}; }
  std::pair<int, int> cell_f(const Key& k) const {  // (stage, mb)
    return stage_first ? std::make_pair(-k.first, k.second) : std::make_pair(-k.second, k.first);
  }
};

}  // namespace

GreedyPlan one_stage_per_rank(int ranks, int microbatches) {
  GreedyPlan plan;
  plan.ranks = ranks;
  plan.stages = ranks;
  plan.microbatches = microbatches;
  plan.rank_of = [](int stage, int) { return stage; };
  return plan;
}

std::vector<std::vector<Action>> greedy_order(const GreedyPlan& plan) {
  const int p = plan.ranks, S = plan.stages, m = plan.microbatches;
  BATON_ASSERT(static_cast<int>(plan.inflight_limit.size()) == p &&
                   static_cast<int>(plan.stash_limit.size()) == p,
               "greedy plan needs one limit per rank");
  for (int r = 0; r < p; ++r) BATON_ASSERT(plan.inflight_limit[r] >= 1, "rank ", r, " limit < 1");
  auto at = [m](int stage, int mb) { return static_cast<size_t>(stage) * m + mb; };
  auto on = [m](int rank, int mb) { return static_cast<size_t>(rank) * m + mb; };

  std::vector<int> owner(static_cast<size_t>(S) * m);
  std::vector<int> visits(static_cast<size_t>(p) * m, 0);  // chunks of (rank, mb)
  for (int s = 0; s < S; ++s) {
    for (int mb = 0; mb < m; ++mb) {
      const int r = plan.rank_of(s, mb);
      BATON_ASSERT(r >= 0 && r < p, "stage ", s, " micro-batch ", mb, " maps to rank ", r);
      owner[at(s, mb)] = r;
      ++visits[on(r, mb)];
    }
  }
  std::vector<char> forward_done(owner.size(), 0), input_backward_done(owner.size(), 0);
  std::vector<char> entered(visits.size(), 0);
  // Per rank: chunks let in and not yet through their input backward, and not
  // yet through their weight backward.
  std::vector<int> inflight(p, 0), stashed(p, 0);
  std::vector<Ready> ready(p, Ready{plan.forward_prefers_later_stage, {}, {}, {}, {}});

  // A forward is ready when its input is; whether its micro-batch is let in
  // cannot change before it runs (only its own forward would let it in).
  auto forward_ready = [&](int s, int mb) {
    const int r = owner[at(s, mb)];
    Ready& q = ready[r];
    if (entered[on(r, mb)])
      q.forward_entered.insert(q.key_f(s, mb));
    else
      q.forward_new[visits[on(r, mb)]].insert(q.key_f(s, mb));
  };
  auto backward_ready = [&](int s, int mb) {
    ready[owner[at(s, mb)]].backward.insert(ready[owner[at(s, mb)]].key_b(s, mb));
  };
  for (int mb = 0; mb < m; ++mb) forward_ready(0, mb);

  std::vector<std::vector<Action>> order(p);
  const size_t total = static_cast<size_t>(S) * m * (plan.split_backward ? 3 : 2);
  const ActionKind backward = plan.split_backward ? ActionKind::I : ActionKind::B;
  size_t done = 0;
  std::vector<Action> chosen(p);
  std::vector<char> has(p);
  while (done < total) {
    for (int r = 0; r < p; ++r) {
      const Ready& q = ready[r];
      has[r] = 1;
      if (!q.backward.empty()) {
        const Key k = *q.backward.begin();
        chosen[r] = {backward, -k.second, k.first};
        continue;
      }
      // The best forward: of a micro-batch let in, or the best new one that fits.
      const Key* best = q.forward_entered.empty() ? nullptr : &*q.forward_entered.begin();
      for (const auto& [need, keys] : q.forward_new) {
        const bool fits = inflight[r] + need <= plan.inflight_limit[r] &&
                          (plan.stash_limit[r] == 0 || stashed[r] + need <= plan.stash_limit[r]);
        if (fits && !keys.empty() && (!best || *keys.begin() < *best)) best = &*keys.begin();
      }
      if (best) {
        const auto [s, mb] = q.cell_f(*best);
        chosen[r] = {ActionKind::F, s, mb};
      } else if (!q.weight.empty()) {
        const Key k = *q.weight.begin();
        chosen[r] = {ActionKind::W, -k.second, k.first};
      } else {
        has[r] = 0;
      }
    }
    // All ranks chose from the state before this time unit; now it ends.
    size_t progressed = 0;
    for (int r = 0; r < p; ++r) {
      if (!has[r]) continue;
      const Action& a = chosen[r];
      const int s = a.stage, mb = a.microbatch;
      Ready& q = ready[r];
      if (a.kind == ActionKind::F) {
        const size_t k = on(r, mb);
        if (entered[k]) {
          q.forward_entered.erase(q.key_f(s, mb));
        } else {
          auto it = q.forward_new.find(visits[k]);
          it->second.erase(q.key_f(s, mb));
          if (it->second.empty()) q.forward_new.erase(it);
          entered[k] = 1;
          inflight[r] += visits[k];
          if (plan.split_backward) stashed[r] += visits[k];
        }
        forward_done[at(s, mb)] = 1;
        if (s + 1 < S) forward_ready(s + 1, mb);
        if (s == S - 1 || input_backward_done[at(s + 1, mb)]) backward_ready(s, mb);
      } else if (a.kind == ActionKind::W) {
        q.weight.erase(q.key_b(s, mb));
        --stashed[r];
      } else {
        q.backward.erase(q.key_b(s, mb));
        input_backward_done[at(s, mb)] = 1;
        --inflight[r];
        if (plan.split_backward) q.weight.insert(q.key_b(s, mb));
        if (s > 0 && forward_done[at(s - 1, mb)]) backward_ready(s - 1, mb);
      }
      order[r].push_back(a);
      ++progressed;
    }
    BATON_ASSERT(progressed > 0, "greedy schedule stalled with ", total - done, " actions left");
    done += progressed;
  }
  return order;
}

}  // namespace baton::schedule::detail
