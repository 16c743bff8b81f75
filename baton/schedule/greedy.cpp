#include "baton/schedule/greedy.h"

#include <tuple>

#include "baton/core/error.h"

namespace baton::schedule::detail {
namespace {

struct Cell {
  int stage;
  int microbatch;
};

// What has run, per (stage, micro-batch) and per (rank, micro-batch).
struct Played {
  int m;
  std::vector<char> forward, input_backward, weight_backward;  // [stage * m + mb]
  std::vector<int> visits, forwards, backwards, weights;       // [rank * m + mb]

  Played(int ranks, int stages, int microbatches)
      : m(microbatches),
        forward(static_cast<size_t>(stages) * m),
        input_backward(forward.size()),
        weight_backward(forward.size()),
        visits(static_cast<size_t>(ranks) * m),
        forwards(visits.size()),
        backwards(visits.size()),
        weights(visits.size()) {}

  size_t at(int stage, int mb) const { return static_cast<size_t>(stage) * m + mb; }
  size_t on(int rank, int mb) const { return static_cast<size_t>(rank) * m + mb; }
};

}  // namespace

std::vector<std::vector<Action>> greedy_order(const GreedyPlan& plan) {
  const int p = plan.ranks, S = plan.stages, m = plan.microbatches;
  BATON_ASSERT(static_cast<int>(plan.inflight_limit.size()) == p &&
                   static_cast<int>(plan.stash_limit.size()) == p,
               "greedy plan needs one limit per rank");
  Played played(p, S, m);
  std::vector<std::vector<Cell>> cells(p);
  for (int s = 0; s < S; ++s) {
    for (int mb = 0; mb < m; ++mb) {
      const int r = plan.rank_of(s, mb);
      BATON_ASSERT(r >= 0 && r < p, "stage ", s, " micro-batch ", mb, " maps to rank ", r);
      cells[r].push_back({s, mb});
      ++played.visits[played.on(r, mb)];
    }
  }
  for (int r = 0; r < p; ++r) BATON_ASSERT(plan.inflight_limit[r] >= 1, "rank ", r, " limit < 1");

  std::vector<std::vector<Action>> order(p);
  const size_t total = static_cast<size_t>(S) * m * (plan.split_backward ? 3 : 2);
  size_t done = 0;
  std::vector<Action> chosen(p);
  std::vector<char> has(p);
  while (done < total) {
    for (int r = 0; r < p; ++r) {
      // Stage chunks the rank holds or has promised to micro-batches it let in:
      // until their input backward, and until their weight backward.
      int inflight = 0, stashed = 0;
      for (int mb = 0; mb < m; ++mb) {
        const size_t k = played.on(r, mb);
        if (played.forwards[k] == 0) continue;
        inflight += played.visits[k] - played.backwards[k];
        if (plan.split_backward) stashed += played.visits[k] - played.weights[k];
      }
      auto may_enter = [&](int mb) {
        const int need = played.visits[played.on(r, mb)];
        return inflight + need <= plan.inflight_limit[r] &&
               (plan.stash_limit[r] == 0 || stashed + need <= plan.stash_limit[r]);
      };
      // Best candidate per kind, as (micro-batch, -stage) or (-stage, micro-batch).
      const Cell* best_b = nullptr;
      const Cell* best_f = nullptr;
      const Cell* best_w = nullptr;
      auto key_b = [](const Cell* c) { return std::make_tuple(c->microbatch, -c->stage); };
      auto key_f = [&](const Cell* c) {
        return plan.forward_prefers_later_stage ? std::make_tuple(-c->stage, c->microbatch)
                                                : std::make_tuple(c->microbatch, -c->stage);
      };
      for (const Cell& c : cells[r]) {
        const size_t k = played.at(c.stage, c.microbatch);
        if (!played.forward[k]) {
          const bool input_ready = c.stage == 0 || played.forward[played.at(c.stage - 1, c.microbatch)];
          const bool entered = played.forwards[played.on(r, c.microbatch)] > 0;
          if (input_ready && (entered || may_enter(c.microbatch)) && (!best_f || key_f(&c) < key_f(best_f)))
            best_f = &c;
        } else if (!played.input_backward[k]) {
          const bool grad_ready =
              c.stage == S - 1 || played.input_backward[played.at(c.stage + 1, c.microbatch)];
          if (grad_ready && (!best_b || key_b(&c) < key_b(best_b))) best_b = &c;
        } else if (plan.split_backward && !played.weight_backward[k]) {
          if (!best_w || key_b(&c) < key_b(best_w)) best_w = &c;
        }
      }
      const ActionKind backward = plan.split_backward ? ActionKind::I : ActionKind::B;
      has[r] = 1;
      if (best_b) chosen[r] = {backward, best_b->stage, best_b->microbatch};
      else if (best_f) chosen[r] = {ActionKind::F, best_f->stage, best_f->microbatch};
      else if (best_w) chosen[r] = {ActionKind::W, best_w->stage, best_w->microbatch};
      else has[r] = 0;
    }
    // All ranks chose from the state before this time unit; now it ends.
    size_t progressed = 0;
    for (int r = 0; r < p; ++r) {
      if (!has[r]) continue;
      const Action& a = chosen[r];
      const size_t k = played.at(a.stage, a.microbatch), kr = played.on(r, a.microbatch);
      if (a.kind == ActionKind::F) {
        played.forward[k] = 1;
        ++played.forwards[kr];
      } else if (a.kind == ActionKind::W) {
        played.weight_backward[k] = 1;
        ++played.weights[kr];
      } else {
        played.input_backward[k] = 1;
        ++played.backwards[kr];
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
