// interleaved-zb: interleaved 1F1B (v stage chunks per rank on the loop map,
// stage c * p + r on rank r) with the zero-bubble split backward (Qi et al.
// 2024): each backward is an I (input gradient, on the critical path) and a W
// (weight gradient) that fills what would be idle time. PyTorch calls its
// version ScheduleInterleavedZeroBubble (the paper's ZB1P on v chunks).
//
// Micro-batches run in groups of g as in `interleaved` (g = p, or m / (m // p)
// when m is not a multiple of p). Rank r:
//   warm-up:   (v - 1) * g + 2 (p - 1 - r) chunk forwards, Megatron's (and
//              baton's `interleaved`'s), so it holds interleaved's activations;
//   steady:    one forward then one I, the I's chunks in reverse order;
//   cool-down: the remaining I's;
// and after the first r I's, each I is followed by the W of the oldest I
// whose W has not run (ZB-H1's lag of r on rank r); the last W's close.
//
// PyTorch's ZB1P warms up with (v - 1) * g + (p - 1 - r) forwards, so the
// first I's gradient must arrive just as the warm-up ends: its order holds
// p - 1 - r fewer chunks but waits on every communication delay. With the
// deeper warm-up the step is as short as PyTorch's without communication and
// shorter with it (tests/sim/pytorch_orders_test.cpp measures both).
#include <algorithm>
#include <deque>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule interleaved_zb(const GeneratorOptions& options) {
  BATON_CHECK(options.virtual_stages != 1,
              "[schedule.interleaved-zb] --virtual 1 is one stage per rank (use schedule zb-h1); "
              "interleaved-zb needs at least 2 stage chunks per rank");
  const int v = detail::check_options("interleaved-zb", options, 2, {detail::kAnyVirtualStages});
  const detail::InterleavedOrder order = detail::interleaved_order("interleaved-zb", options, v);
  const int p = order.p, g = order.g, total = order.total();
  Schedule s = detail::empty_schedule("interleaved-zb", options, p * v, StageMap::Loop);
  for (int r = 0; r < p; ++r) {
    auto& list = s.actions[r];
    const int warmup = std::min(total, (v - 1) * g + 2 * (p - 1 - r));
    auto add = [&](ActionKind kind, int k, bool forward) {
      list.push_back({kind, order.chunk(k, forward) * p + r, order.microbatch(k)});
    };
    std::deque<int> waiting_w;  // backward indices whose I ran and W has not
    int inputs_done = 0;
    auto input = [&](int k) {
      add(ActionKind::I, k, false);
      waiting_w.push_back(k);
      if (++inputs_done > r) {
        add(ActionKind::W, waiting_w.front(), false);
        waiting_w.pop_front();
      }
    };
    int next_f = 0, next_i = 0;
    while (next_f < warmup) add(ActionKind::F, next_f++, true);
    while (next_f < total) {
      add(ActionKind::F, next_f++, true);
      input(next_i++);
    }
    while (next_i < total) input(next_i++);
    for (int k : waiting_w) add(ActionKind::W, k, false);
  }
  return s;
}

}  // namespace baton::schedule
