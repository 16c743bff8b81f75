#include "baton/schedule/walk.h"

#include <deque>

namespace baton::schedule {
namespace {

// Per (stage, micro-batch) flags of what has run.
struct Progress {
  int microbatches;
  std::vector<std::vector<char>> done;  // [kind][stage * m + mb]

  Progress(int stages, int m)
      : microbatches(m),
        done(kActionKindCount, std::vector<char>(static_cast<size_t>(stages) * m, 0)) {}

  char& at(ActionKind kind, int stage, int mb) {
    return done[static_cast<size_t>(kind)][static_cast<size_t>(stage) * microbatches + mb];
  }
  bool input_backward_done(int stage, int mb) {
    return at(ActionKind::B, stage, mb) || at(ActionKind::I, stage, mb);
  }
};

// Per (skip, micro-batch) flags of the skip transfers that have run (one bit
// for each of SEND_F, RECV_F, SEND_B and RECV_B).
struct SkipProgress {
  int microbatches;
  std::vector<std::vector<bool>> done;  // [kind - SEND_F][skip * m + mb]

  SkipProgress(size_t skips, int m) : microbatches(m), done(4, std::vector<bool>(skips * m)) {}
  std::vector<bool>::reference at(ActionKind kind, int skip, int mb) {
    const size_t row = static_cast<size_t>(kind) - static_cast<size_t>(ActionKind::SEND_F);
    return done[row][static_cast<size_t>(skip) * microbatches + mb];
  }
};

}  // namespace

WalkResult walk(const Schedule& schedule, const Placement& placement, const WalkVisitor& visit) {
  const int p = static_cast<int>(schedule.actions.size());
  const int S = schedule.stages;
  const bool lowered = schedule.has_communication();
  Progress progress(S, schedule.microbatches);
  SkipProgress skipped(schedule.skips.size(), schedule.microbatches);
  const int skips = static_cast<int>(schedule.skips.size());
  // The first skip transfer that `stage`'s `kind` of `mb` on `rank` still
  // waits for (as producer or consumer), or -1.
  auto missing_skip = [&](ActionKind kind, int stage, int mb, int rank, bool producer) {
    for (int k = 0; k < skips; ++k) {
      const Skip& skip = schedule.skips[k];
      if ((producer ? skip.from : skip.to) != stage) continue;
      if (placement.rank_of(producer ? skip.to : skip.from, mb) == rank) continue;
      if (!skipped.at(kind, k, mb)) return k;
    }
    return -1;
  };
  WalkResult result;
  result.next.assign(p, 0);
  result.waits.assign(p, Wait{});

  // Returns true when `a` on `rank` may run; else fills `wait`.
  auto ready = [&](int rank, const Action& a, Wait& wait, int& producer) -> bool {
    const int s = a.stage, mb = a.microbatch;
    producer = -1;
    auto need = [&](ActionKind kind, int stage, int on_rank, int skip = -1) {
      wait = Wait{Action{kind, stage, mb, skip}, on_rank};
      return false;
    };
    if (a.skip >= 0) {  // a skip connection's transfer
      const Skip& skip = schedule.skips[a.skip];
      switch (a.kind) {
        case ActionKind::SEND_F:
          return progress.at(ActionKind::F, s, mb) ? true : need(ActionKind::F, s, rank);
        case ActionKind::SEND_B:
          return progress.input_backward_done(s, mb) ? true : need(ActionKind::I, s, rank);
        case ActionKind::RECV_F:
          producer = placement.rank_of(skip.from, mb);
          return skipped.at(ActionKind::SEND_F, a.skip, mb)
                     ? true
                     : need(ActionKind::SEND_F, skip.from, producer, a.skip);
        default:  // RECV_B
          producer = placement.rank_of(skip.to, mb);
          return skipped.at(ActionKind::SEND_B, a.skip, mb)
                     ? true
                     : need(ActionKind::SEND_B, skip.to, producer, a.skip);
      }
    }
    // A compute action of a lowered schedule also waits for its skips' receives.
    if (lowered && skips > 0 && (a.kind == ActionKind::F || is_input_backward(a.kind))) {
      const bool forward = a.kind == ActionKind::F;
      const ActionKind recv = forward ? ActionKind::RECV_F : ActionKind::RECV_B;
      const int k = missing_skip(recv, s, mb, rank, /*producer=*/!forward);
      if (k >= 0) return need(recv, s, rank, k);
    }
    switch (a.kind) {
      case ActionKind::F: {
        if (s == 0) return true;
        const int prev = placement.rank_of(s - 1, mb);
        if (prev != rank && lowered) {
          return progress.at(ActionKind::RECV_F, s, mb) ? true : need(ActionKind::RECV_F, s, rank);
        }
        if (!progress.at(ActionKind::F, s - 1, mb)) return need(ActionKind::F, s - 1, prev);
        if (prev != rank) producer = prev;
        return true;
      }
      case ActionKind::B:
      case ActionKind::I: {
        if (!progress.at(ActionKind::F, s, mb)) return need(ActionKind::F, s, rank);
        if (s == S - 1) return true;
        const int next = placement.rank_of(s + 1, mb);
        if (next != rank && lowered) {
          return progress.at(ActionKind::RECV_B, s, mb) ? true : need(ActionKind::RECV_B, s, rank);
        }
        if (!progress.input_backward_done(s + 1, mb)) {
          const bool split = progress.at(ActionKind::I, s, mb) || a.kind == ActionKind::I;
          return need(split ? ActionKind::I : ActionKind::B, s + 1, next);
        }
        if (next != rank) producer = next;
        return true;
      }
      case ActionKind::W:
        return progress.at(ActionKind::I, s, mb) ? true : need(ActionKind::I, s, rank);
      case ActionKind::SEND_F:
        return progress.at(ActionKind::F, s, mb) ? true : need(ActionKind::F, s, rank);
      case ActionKind::SEND_B:
        return progress.input_backward_done(s, mb) ? true : need(ActionKind::I, s, rank);
      case ActionKind::RECV_F: {
        producer = s > 0 ? placement.rank_of(s - 1, mb) : -1;
        return progress.at(ActionKind::SEND_F, s - 1, mb)
                   ? true
                   : need(ActionKind::SEND_F, s - 1, producer);
      }
      case ActionKind::RECV_B: {
        producer = s + 1 < S ? placement.rank_of(s + 1, mb) : -1;
        return progress.at(ActionKind::SEND_B, s + 1, mb)
                   ? true
                   : need(ActionKind::SEND_B, s + 1, producer);
      }
      // Rank-local: the validator checks statically that it follows the
      // stage's backwards on its rank; every dp replica runs the same list.
      case ActionKind::REDUCE_GRAD:
      case ActionKind::REDUCE_SCATTER:
        return true;
      // A dp collective (UNSHARD) or a free (RESHARD) of the rank's own
      // stage: the validator places them around the stage's compute here.
      case ActionKind::UNSHARD:
      case ActionKind::RESHARD:
        return true;
      // Sums with the other copies; the validator puts it after all of its
      // rank's other actions, so no action of the step waits for it.
      case ActionKind::REDUCE_TIED:
        return true;
      // A sum over every rank; the validator makes it every rank's last action.
      case ActionKind::CLIP_NORM:
        return true;
    }
    return false;
  };

  std::deque<int> queue;
  std::vector<char> queued(p, 1);
  for (int r = 0; r < p; ++r) queue.push_back(r);
  auto wake = [&](int r) {
    if (r >= 0 && r < p && !queued[r]) {
      queued[r] = 1;
      queue.push_back(r);
    }
  };
  while (!queue.empty()) {
    const int r = queue.front();
    queue.pop_front();
    queued[r] = 0;
    const auto& list = schedule.actions[r];
    size_t& i = result.next[r];
    while (i < list.size()) {
      const Action& a = list[i];
      Wait wait;
      int producer = -1;
      if (!ready(r, a, wait, producer)) {
        result.waits[r] = wait;
        break;
      }
      if (visit) visit(r, i, producer);
      ++i;
      if (is_step_action(a.kind)) continue;  // its number is not a micro-batch; it wakes no one
      if (a.skip >= 0) {
        skipped.at(a.kind, a.skip, a.microbatch) = 1;
        const Skip& skip = schedule.skips[a.skip];
        wake(placement.rank_of(skip.from, a.microbatch));
        wake(placement.rank_of(skip.to, a.microbatch));
        continue;
      }
      progress.at(a.kind, a.stage, a.microbatch) = 1;
      if (a.stage > 0) wake(placement.rank_of(a.stage - 1, a.microbatch));
      if (a.stage + 1 < S) wake(placement.rank_of(a.stage + 1, a.microbatch));
    }
  }
  result.complete = true;
  for (int r = 0; r < p; ++r) result.complete &= result.next[r] == schedule.actions[r].size();
  return result;
}

}  // namespace baton::schedule
