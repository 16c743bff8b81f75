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

// One walk of a schedule: each rank runs its list in order while its next
// action is ready, and an action that ran wakes the ranks that may wait for it.
class Walker {
 public:
  Walker(const Schedule& schedule, const Placement& placement, const WalkVisitor& visit)
      : schedule_(schedule),
        placement_(placement),
        visit_(visit),
        p_(static_cast<int>(schedule.actions.size())),
        stages_(schedule.stages),
        skips_(static_cast<int>(schedule.skips.size())),
        lowered_(schedule.has_communication()),
        progress_(schedule.stages, schedule.microbatches),
        skipped_(schedule.skips.size(), schedule.microbatches),
        queued_(p_, 1) {
    result_.next.assign(p_, 0);
    result_.waits.assign(p_, Wait{});
    for (int r = 0; r < p_; ++r) queue_.push_back(r);
  }

  WalkResult run() {
    while (!queue_.empty()) {
      const int r = queue_.front();
      queue_.pop_front();
      queued_[r] = 0;
      run_rank(r);
    }
    result_.complete = true;
    for (int r = 0; r < p_; ++r) result_.complete &= result_.next[r] == schedule_.actions[r].size();
    return std::move(result_);
  }

 private:
  // Runs rank r's actions until one is not ready (its wait recorded) or the list ends.
  void run_rank(int r) {
    const auto& list = schedule_.actions[r];
    size_t& i = result_.next[r];
    while (i < list.size()) {
      const Action& a = list[i];
      Wait wait;
      int producer = -1;
      if (!ready(r, a, wait, producer)) {
        result_.waits[r] = wait;
        return;
      }
      if (visit_) visit_(r, i, producer);
      ++i;
      record(a);
    }
  }

  // Marks `a` done and wakes the ranks of its neighbouring stages (or of its skip's ends).
  void record(const Action& a) {
    if (is_step_action(a.kind)) return;  // its number is not a micro-batch; it wakes no one
    if (a.skip >= 0) {
      skipped_.at(a.kind, a.skip, a.microbatch) = 1;
      const Skip& skip = schedule_.skips[a.skip];
      wake(placement_.rank_of(skip.from, a.microbatch));
      wake(placement_.rank_of(skip.to, a.microbatch));
      return;
    }
    progress_.at(a.kind, a.stage, a.microbatch) = 1;
    if (a.stage > 0) wake(placement_.rank_of(a.stage - 1, a.microbatch));
    if (a.stage + 1 < stages_) wake(placement_.rank_of(a.stage + 1, a.microbatch));
  }

  void wake(int r) {
    if (r >= 0 && r < p_ && !queued_[r]) {
      queued_[r] = 1;
      queue_.push_back(r);
    }
  }

  // Fills `wait` with what `a` waits for; returns false (for `ready`'s returns).
  static bool need(Wait& wait, ActionKind kind, int stage, int mb, int on_rank, int skip = -1) {
    wait = Wait{Action{kind, stage, mb, skip}, on_rank};
    return false;
  }

  // The first skip transfer that `stage`'s `kind` of `mb` on `rank` still
  // waits for (as producer or consumer), or -1.
  int missing_skip(ActionKind kind, int stage, int mb, int rank, bool producer) {
    for (int k = 0; k < skips_; ++k) {
      const Skip& skip = schedule_.skips[k];
      if ((producer ? skip.from : skip.to) != stage) continue;
      if (placement_.rank_of(producer ? skip.to : skip.from, mb) == rank) continue;
      if (!skipped_.at(kind, k, mb)) return k;
    }
    return -1;
  }

  // Whether `a` on `rank` may run; else fills `wait`. `producer`: the rank
  // whose output `a` consumes, when another one's.
  bool ready(int rank, const Action& a, Wait& wait, int& producer) {
    producer = -1;
    if (a.skip >= 0) return skip_transfer_ready(rank, a, wait, producer);
    const int s = a.stage, mb = a.microbatch;
    // A compute action of a lowered schedule also waits for its skips' receives.
    if (lowered_ && skips_ > 0 && (a.kind == ActionKind::F || is_input_backward(a.kind))) {
      const bool forward = a.kind == ActionKind::F;
      const ActionKind recv = forward ? ActionKind::RECV_F : ActionKind::RECV_B;
      const int k = missing_skip(recv, s, mb, rank, /*producer=*/!forward);
      if (k >= 0) return need(wait, recv, s, mb, rank, k);
    }
    switch (a.kind) {
      case ActionKind::F:
        return forward_ready(rank, a, wait, producer);
      case ActionKind::B:
      case ActionKind::I:
        return backward_ready(rank, a, wait, producer);
      case ActionKind::W:
        return progress_.at(ActionKind::I, s, mb) || need(wait, ActionKind::I, s, mb, rank);
      case ActionKind::SEND_F:
        return progress_.at(ActionKind::F, s, mb) || need(wait, ActionKind::F, s, mb, rank);
      case ActionKind::SEND_B:
        return progress_.input_backward_done(s, mb) || need(wait, ActionKind::I, s, mb, rank);
      case ActionKind::RECV_F:
        producer = s > 0 ? placement_.rank_of(s - 1, mb) : -1;
        return progress_.at(ActionKind::SEND_F, s - 1, mb) ||
               need(wait, ActionKind::SEND_F, s - 1, mb, producer);
      case ActionKind::RECV_B:
        producer = s + 1 < stages_ ? placement_.rank_of(s + 1, mb) : -1;
        return progress_.at(ActionKind::SEND_B, s + 1, mb) ||
               need(wait, ActionKind::SEND_B, s + 1, mb, producer);
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
  }

  // A skip connection's transfer: a send after its own compute, a receive
  // after the other end's send.
  bool skip_transfer_ready(int rank, const Action& a, Wait& wait, int& producer) {
    const int s = a.stage, mb = a.microbatch;
    const Skip& skip = schedule_.skips[a.skip];
    switch (a.kind) {
      case ActionKind::SEND_F:
        return progress_.at(ActionKind::F, s, mb) || need(wait, ActionKind::F, s, mb, rank);
      case ActionKind::SEND_B:
        return progress_.input_backward_done(s, mb) || need(wait, ActionKind::I, s, mb, rank);
      case ActionKind::RECV_F:
        producer = placement_.rank_of(skip.from, mb);
        return skipped_.at(ActionKind::SEND_F, a.skip, mb) ||
               need(wait, ActionKind::SEND_F, skip.from, mb, producer, a.skip);
      default:  // RECV_B
        producer = placement_.rank_of(skip.to, mb);
        return skipped_.at(ActionKind::SEND_B, a.skip, mb) ||
               need(wait, ActionKind::SEND_B, skip.to, mb, producer, a.skip);
    }
  }

  // F: after the previous stage's F of the micro-batch (its RECV_F when lowered across ranks).
  bool forward_ready(int rank, const Action& a, Wait& wait, int& producer) {
    const int s = a.stage, mb = a.microbatch;
    if (s == 0) return true;
    const int prev = placement_.rank_of(s - 1, mb);
    if (prev != rank && lowered_)
      return progress_.at(ActionKind::RECV_F, s, mb) || need(wait, ActionKind::RECV_F, s, mb, rank);
    if (!progress_.at(ActionKind::F, s - 1, mb)) return need(wait, ActionKind::F, s - 1, mb, prev);
    if (prev != rank) producer = prev;
    return true;
  }

  // B or I: after the stage's own F and the next stage's input backward
  // (its RECV_B when lowered across ranks).
  bool backward_ready(int rank, const Action& a, Wait& wait, int& producer) {
    const int s = a.stage, mb = a.microbatch;
    if (!progress_.at(ActionKind::F, s, mb)) return need(wait, ActionKind::F, s, mb, rank);
    if (s == stages_ - 1) return true;
    const int next = placement_.rank_of(s + 1, mb);
    if (next != rank && lowered_)
      return progress_.at(ActionKind::RECV_B, s, mb) || need(wait, ActionKind::RECV_B, s, mb, rank);
    if (!progress_.input_backward_done(s + 1, mb)) {
      const bool split = progress_.at(ActionKind::I, s, mb) || a.kind == ActionKind::I;
      return need(wait, split ? ActionKind::I : ActionKind::B, s + 1, mb, next);
    }
    if (next != rank) producer = next;
    return true;
  }

  const Schedule& schedule_;
  const Placement& placement_;
  const WalkVisitor& visit_;
  const int p_, stages_, skips_;
  const bool lowered_;
  Progress progress_;
  SkipProgress skipped_;
  WalkResult result_;
  std::deque<int> queue_;
  std::vector<char> queued_;
};

}  // namespace

WalkResult walk(const Schedule& schedule, const Placement& placement, const WalkVisitor& visit) {
  return Walker(schedule, placement, visit).run();
}

}  // namespace baton::schedule
