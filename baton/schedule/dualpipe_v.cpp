// dualpipev: DeepSeek's DualPipe (DeepSeek-V3 report, 2024) cut in half, in
// the order of PyTorch's ScheduleDualPipeV. Two stage chunks per rank in a V
// (rank r holds c0 = stage r and c1 = stage 2p - 1 - r), m >= 2p (PyTorch's
// rule: at least as many micro-batches as stages). Per rank:
//   1. 2(p - r - 1) forwards of c0;
//   2. r + 1 pairs (F c0, F c1);
//   3. p - r - 1 times: I c1, the oldest pending W, F c1;
//   4. m - 2p + r + 1 times: (F c0, B c1), (F c1, B c0);
//   5. p - r - 1 times: B c1, (F c1, B c0);
//   6. r + 1 times: a backward of c1, then of c0; full B for the first half,
//      then I (the later half leaves its W for the bubble that follows);
//   7. p - r - 1 times: the oldest pending W, I c0;
//   8. the remaining Ws, oldest first.
// DualPipe overlaps the forward of one chunk with the backward of the other
// (their compute and all-to-all communication hide each other). In baton's IR
// such a pair is two adjacent actions, F then B, run one after the other;
// baton overlaps the pair's point-to-point transfers with compute only as it
// does for every schedule (receives are posted when the step starts, sends
// complete asynchronously). So "F&B" in DualPipe's formulas is F + B here.
//
// DualPipe's README gives DualPipeV, with PP = 2p stages on p ranks, a bubble
// of (PP/2 - 1)(F&B + B - 3W) = (p - 1)(F + 2B - 3W) in chunk costs, and
// PP + 1 = 2p + 1 chunks of activation memory per rank (rank 0 holds 2p
// forwards when its first F of step 4 runs before its B). Tests hold the
// simulated step to both: the memory is reached exactly on rank 0, and the
// formula bounds the step beyond the work and every rank's idle time within
// its span (with F = I = W it is loose: (p - 1)F is measured).
#include <deque>
#include <map>
#include <utility>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {
namespace {

// One rank's list under construction: the next micro-batch of each (kind,
// stage), with B and I sharing a count, and the Is whose W is still to come.
class RankOrder {
 public:
  explicit RankOrder(std::vector<Action>* out) : out_(out) {}

  void forward(int stage) { out_->push_back({ActionKind::F, stage, next_[{0, stage}]++}); }
  void backward(int stage, bool split) {
    const int mb = next_[{1, stage}]++;
    out_->push_back({split ? ActionKind::I : ActionKind::B, stage, mb});
    if (split) pending_weights_.push_back({stage, mb});
  }
  void oldest_weight() {
    if (pending_weights_.empty()) return;
    const auto [stage, mb] = pending_weights_.front();
    pending_weights_.pop_front();
    out_->push_back({ActionKind::W, stage, mb});
  }
  bool weights_pending() const { return !pending_weights_.empty(); }

 private:
  std::vector<Action>* out_;
  std::map<std::pair<int, int>, int> next_;  // (0 = F / 1 = B or I, stage) -> micro-batch
  std::deque<std::pair<int, int>> pending_weights_;
};

}  // namespace

Schedule dualpipe_v(const GeneratorOptions& options) {
  detail::check_options("dualpipev", options, 2, {2});
  const int p = options.ranks, m = options.microbatches;
  BATON_CHECK(m >= 2 * p, "[schedule.dualpipev] needs m >= 2p (at least as many micro-batches as ",
              "its 2p stages, as PyTorch's ScheduleDualPipeV); got m=", m, ", p=", p,
              " (try m=", 2 * p, ")");
  Schedule s = detail::empty_schedule("dualpipev", options, 2 * p, StageMap::V);
  for (int r = 0; r < p; ++r) {
    const int c0 = r, c1 = 2 * p - 1 - r;
    RankOrder order(&s.actions[r]);
    for (int k = 0; k < 2 * (p - r - 1); ++k) order.forward(c0);
    for (int k = 0; k < r + 1; ++k) {
      order.forward(c0);
      order.forward(c1);
    }
    for (int k = 0; k < p - r - 1; ++k) {
      order.backward(c1, true);
      order.oldest_weight();
      order.forward(c1);
    }
    for (int k = 0; k < m - 2 * p + r + 1; ++k) {
      order.forward(c0);
      order.backward(c1, false);
      order.forward(c1);
      order.backward(c0, false);
    }
    for (int k = 0; k < p - r - 1; ++k) {
      order.backward(c1, false);
      order.forward(c1);
      order.backward(c0, false);
    }
    // Splitting starts halfway through; an odd rank switches one backward
    // earlier (before c1 rather than before c0), as PyTorch does.
    const int half = (r + 1) / 2;
    for (int k = 0; k < r + 1; ++k) {
      order.backward(c1, k > half || (k == half && r % 2 == 1));
      order.backward(c0, k >= half);
    }
    for (int k = 0; k < p - r - 1; ++k) {
      order.oldest_weight();
      order.backward(c0, true);
    }
    while (order.weights_pending()) order.oldest_weight();
  }
  return s;
}

}  // namespace baton::schedule
