// zb-auto (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", section 3's
// automatic scheduling): given the costs of F, I and W, the communication
// latency between ranks and a memory limit, search for the order with the
// shortest step on the usual layout (stage s on rank s, backward split into I
// and W).
//
// The paper builds an initial order with a heuristic and refines it with an
// ILP. baton keeps the heuristic part, played with the real costs instead of
// unit ones, and searches its knobs:
//   - each rank holds at most L micro-batches between their F and their I,
//     for every L from 1 to the memory limit (the paper's M_limit, in
//     micro-batches' worth of one stage's activations; default p, 1F1B's);
//   - a rank that would idle runs a pending W to fill the gap, either always
//     (even if an F or I then waits for it) or only when the W ends before the
//     next F or I can start.
// Each candidate is an event-driven play of the step: every rank, when free,
// starts the ready I first, else the next forward (micro-batches in order)
// if its memory allows, else a W; the rank whose next start is earliest goes
// first. The handcrafted orders that fit the limit (1f1b and zb-h1 at p,
// zb-h2 at 2p - 1) are candidates too. Every candidate is timed with the same
// costs (time_order below), and the one whose last action (the W included)
// ends earliest wins; of equal ones, the one whose longest rank span (first
// start to last end: the step time once steps overlap) is shortest. Without an ILP it can miss the
// paper's optimum, but it is never slower than 1F1B, ZB-H1 or ZB-H2 within its memory (tests check
// this, and that the simulator agrees with time_order to the last digit).
#include <algorithm>
#include <limits>
#include <vector>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// One event-driven play with in-flight limit `limit` on every rank: the
// order each rank ran its actions in.
std::vector<std::vector<Action>> play(int p, int m, const ZbAutoCosts& c, int limit,
                                      bool strict_fill) {
  // End times per (stage, micro-batch); kNever until played.
  std::vector<std::vector<double>> f_end(p, std::vector<double>(m, kNever));
  std::vector<std::vector<double>> i_end(p, std::vector<double>(m, kNever));
  std::vector<int> next_f(p, 0), next_i(p, 0), inflight(p, 0);
  std::vector<std::vector<int>> pending_w(p);  // micro-batches whose I ran, W not yet
  std::vector<size_t> next_w(p, 0);
  std::vector<double> free_at(p, 0);
  std::vector<std::vector<Action>> out(p);
  int left = 3 * p * m;
  auto f_ready = [&](int r) {
    const int mb = next_f[r];
    if (mb >= m || inflight[r] >= limit) return kNever;
    return r == 0 ? 0.0 : f_end[r - 1][mb] + c.comm;
  };
  // I runs in micro-batch order on each stage, as the gradients arrive.
  auto i_ready = [&](int r) {
    const int mb = next_i[r];
    if (mb >= next_f[r]) return kNever;
    return r == p - 1 ? f_end[r][mb] : std::max(f_end[r][mb], i_end[r + 1][mb] + c.comm);
  };
  while (left > 0) {
    int best_rank = -1;
    double best_start = kNever;
    ActionKind best_kind = ActionKind::F;
    for (int r = 0; r < p; ++r) {
      const double t = free_at[r];
      const double ri = i_ready(r), rf = f_ready(r);
      const bool has_w = next_w[r] < pending_w[r].size();
      double start = kNever;
      ActionKind kind = ActionKind::F;
      if (ri <= t) {
        start = t, kind = ActionKind::I;
      } else if (rf <= t) {
        start = t, kind = ActionKind::F;
      } else {
        const double next = std::min(ri, rf);
        if (has_w && (!strict_fill || next == kNever || t + c.w <= next)) {
          start = t, kind = ActionKind::W;
        } else if (next < kNever) {
          start = next, kind = ri <= rf ? ActionKind::I : ActionKind::F;
        } else if (has_w) {
          start = t, kind = ActionKind::W;
        }
      }
      if (start < best_start) best_rank = r, best_start = start, best_kind = kind;
    }
    // A dependency not yet played shows as kNever; with F in order and I
    // after its F, some rank can always move.
    BATON_ASSERT(best_rank >= 0, "[schedule.zb-auto] the play found no action to run");
    const int r = best_rank;
    int mb = 0;
    double cost = 0;
    switch (best_kind) {
      case ActionKind::F:
        mb = next_f[r]++;
        ++inflight[r];
        cost = c.f;
        f_end[r][mb] = best_start + cost;
        break;
      case ActionKind::I:
        mb = next_i[r]++;
        --inflight[r];
        cost = c.i;
        i_end[r][mb] = best_start + cost;
        pending_w[r].push_back(mb);
        break;
      default:
        mb = pending_w[r][next_w[r]++];
        cost = c.w;
        break;
    }
    free_at[r] = best_start + cost;
    out[r].push_back({best_kind, r, mb});
    --left;
  }
  return out;
}

struct Timing {
  double makespan = kNever;  // the last action's end; the step starts at 0
  double span = kNever;      // the longest of one rank's first start to its last end
};

// The step time of per-rank orders on the loop layout (stage s on rank s)
// under costs `c`: each action starts when its rank is free and its inputs
// are there (another rank's output `c.comm` after it ends). Infinity if the
// orders deadlock.
Timing time_order(const std::vector<std::vector<Action>>& orders, int p, int m,
                  const ZbAutoCosts& c) {
  std::vector<std::vector<double>> f_end(p, std::vector<double>(m, kNever));
  std::vector<std::vector<double>> i_end(p, std::vector<double>(m, kNever));
  std::vector<size_t> next(p, 0);
  std::vector<double> free_at(p, 0), first_start(p, kNever);
  size_t left = 0;
  for (const auto& order : orders) left += order.size();
  bool moved = true;
  while (left > 0 && moved) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      while (next[r] < orders[r].size()) {
        const Action& a = orders[r][next[r]];
        const int s = a.stage, mb = a.microbatch;
        double ready = 0, cost = 0;
        switch (a.kind) {
          case ActionKind::F:
            ready = s == 0 ? 0 : f_end[s - 1][mb] + c.comm;
            cost = c.f;
            break;
          case ActionKind::B:
          case ActionKind::I:
            ready = s == p - 1 ? f_end[s][mb] : std::max(f_end[s][mb], i_end[s + 1][mb] + c.comm);
            cost = a.kind == ActionKind::B ? c.i + c.w : c.i;
            break;
          default:  // W after its I, on this rank
            ready = i_end[s][mb];
            cost = c.w;
            break;
        }
        if (ready == kNever) break;
        const double start = std::max(free_at[r], ready);
        first_start[r] = std::min(first_start[r], start);
        free_at[r] = start + cost;
        if (a.kind == ActionKind::F) f_end[s][mb] = free_at[r];
        // A full B hands its input gradient on only when it ends.
        if (a.kind == ActionKind::I || a.kind == ActionKind::B) i_end[s][mb] = free_at[r];
        ++next[r];
        --left;
        moved = true;
      }
    }
  }
  if (left > 0) return {};
  Timing t{0, 0};
  for (int r = 0; r < p; ++r) {
    t.makespan = std::max(t.makespan, free_at[r]);
    if (!orders[r].empty()) t.span = std::max(t.span, free_at[r] - first_start[r]);
  }
  return t;
}

struct Winner {
  Timing timing;
  std::vector<std::vector<Action>> actions;
};

Winner search(const GeneratorOptions& options) {
  const int p = options.ranks, m = options.microbatches;
  const ZbAutoCosts& c = options.zb_auto;
  BATON_CHECK(c.f > 0 && c.i > 0 && c.w >= 0 && c.comm >= 0 && c.f < kNever && c.i < kNever &&
                  c.w < kNever && c.comm < kNever,
              "[schedule.zb-auto] costs must be finite with F > 0, I > 0, W >= 0 and "
              "communication >= 0; got F=",
              c.f, " I=", c.i, " W=", c.w, " comm=", c.comm);
  BATON_CHECK(c.memory_limit >= 0,
              "[schedule.zb-auto] memory limit must be >= 1 micro-batch "
              "(0: p, 1F1B's), got ",
              c.memory_limit);
  const int limit = c.memory_limit > 0 ? c.memory_limit : p;
  Winner best;
  auto consider = [&](std::vector<std::vector<Action>> actions) {
    // The shortest step; among equal ones the shortest span, which is the
    // step time when steps overlap (the runtime's default, no barrier).
    const Timing t = time_order(actions, p, m, c);
    if (t.makespan < best.timing.makespan ||
        (t.makespan == best.timing.makespan && t.span < best.timing.span)) {
      best = {t, std::move(actions)};
    }
  };
  // Every L up to 16; past that a spread of them (a play costs O(p^2 m)).
  const int most = std::min(limit, m);
  for (int l = 1; l <= most; ++l) {
    if (most > 16 && l != most && l != most - 1 && l % std::max(1, most / 8) != 0) continue;
    for (bool strict : {true, false}) consider(play(p, m, c, l, strict));
  }
  GeneratorOptions plain = options;
  plain.virtual_stages = 0;
  if (limit >= p) {
    consider(one_f_one_b(plain).actions);
    consider(zb_h1(plain).actions);
  }
  if (limit >= 2 * p - 1 && m >= 2 * p) consider(zb_h2(plain).actions);
  return best;
}

}  // namespace

Schedule zb_auto(const GeneratorOptions& options) {
  detail::check_options("zb-auto", options, 1);
  Schedule s = detail::empty_schedule("zb-auto", options, options.ranks, StageMap::Loop);
  s.actions = search(options).actions;
  return s;
}

double zb_auto_predicted_step(const GeneratorOptions& options) {
  detail::check_options("zb-auto", options, 1);
  return search(options).timing.makespan;
}

}  // namespace baton::schedule
