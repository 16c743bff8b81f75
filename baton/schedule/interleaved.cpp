// interleaved 1F1B (Megatron-LM, Narayanan et al. 2021): each rank holds v
// stage chunks on the loop map (stage c * p + r on rank r). Micro-batches run
// in groups of g = p: a rank runs chunk 0 of a group's g micro-batches, then
// chunk 1 of the same group, and so on; backwards walk the chunks in reverse.
// Rank r warms up with (p - r - 1) * 2 + (v - 1) * g chunk forwards (all of
// them when m == p), then alternates one forward and one backward, then
// drains. The bubble shrinks to (1 / v) * (p - 1) / m of the ideal compute.
//
// m not a multiple of p follows PyTorch's ScheduleInterleaved1F1B: m // p
// rounds (at least one) of g = m / rounds micro-batches each, which needs
// m % rounds == 0 (m < p gives one round of m).
#include <algorithm>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"

namespace baton::schedule {

namespace detail {

InterleavedOrder interleaved_order(const char* name, const GeneratorOptions& options, int v) {
  const int p = options.ranks, m = options.microbatches;
  const int rounds = std::max(1, m / p);
  BATON_CHECK(m % rounds == 0, "[schedule.", name, "] micro-batches m=", m, " with pp=", p, ": ",
              name,
              " runs micro-batches in equal groups of at least p (Megatron: groups of p), and ", m,
              " does not split into ", m, " / ", p, " = ", rounds,
              " equal groups; use a multiple of pp (try m=", (m / p + 1) * p, ") or of ", rounds);
  return {p, v, m, m / rounds};
}

}  // namespace detail

Schedule interleaved(const GeneratorOptions& options) {
  BATON_CHECK(options.virtual_stages != 1,
              "[schedule.interleaved] --virtual 1 is plain 1F1B (use schedule 1f1b); "
              "interleaved needs at least 2 stage chunks per rank");
  const int v = detail::check_options("interleaved", options, 2, {detail::kAnyVirtualStages});
  const detail::InterleavedOrder order = detail::interleaved_order("interleaved", options, v);
  const int p = order.p, m = order.m, g = order.g, total = order.total();
  Schedule s = detail::empty_schedule("interleaved", options, p * v, StageMap::Loop);
  for (int r = 0; r < p; ++r) {
    auto& list = s.actions[r];
    const int warmup = m == p ? total : std::min(total, (p - r - 1) * 2 + (v - 1) * g);
    auto forward = [&](int k) {
      list.push_back({ActionKind::F, order.chunk(k, true) * p + r, order.microbatch(k)});
    };
    auto backward = [&](int k) {
      list.push_back({ActionKind::B, order.chunk(k, false) * p + r, order.microbatch(k)});
    };
    int next_f = 0, next_b = 0;
    while (next_f < warmup) forward(next_f++);
    while (next_f < total) {
      forward(next_f++);
      backward(next_b++);
    }
    while (next_b < total) backward(next_b++);
  }
  return s;
}

}  // namespace baton::schedule
