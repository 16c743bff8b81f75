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

Schedule interleaved(const GeneratorOptions& options) {
  BATON_CHECK(options.virtual_stages != 1,
              "[schedule.interleaved] --virtual 1 is plain 1F1B (use schedule 1f1b); "
              "interleaved needs at least 2 stage chunks per rank");
  const int v = detail::check_options("interleaved", options, 2, {detail::kAnyVirtualStages});
  const int p = options.ranks, m = options.microbatches;
  const int rounds = std::max(1, m / p);
  BATON_CHECK(m % rounds == 0, "[schedule.interleaved] micro-batches m=", m, " with pp=", p,
              ": interleaved 1F1B runs micro-batches in equal groups of at least p (Megatron: "
              "groups of p), and ",
              m, " does not split into ", m, " / ", p, " = ", rounds,
              " equal groups; use a multiple of pp (try m=", (m / p + 1) * p, ") or of ", rounds);
  const int g = m / rounds;  // micro-batches per group; p when m is a multiple of p
  Schedule s = detail::empty_schedule("interleaved", options, p * v, StageMap::Loop);
  const int total = m * v;  // chunk-micro-batches per rank
  const int round = g * v;  // chunk-micro-batches per group
  auto microbatch = [&](int k) { return (k / round) * g + k % g; };
  auto chunk = [&](int k, bool forward) {
    const int c = (k % round) / g;
    return forward ? c : v - 1 - c;
  };
  for (int r = 0; r < p; ++r) {
    auto& list = s.actions[r];
    const int warmup = m == p ? total : std::min(total, (p - r - 1) * 2 + (v - 1) * g);
    auto forward = [&](int k) {
      list.push_back({ActionKind::F, chunk(k, true) * p + r, microbatch(k)});
    };
    auto backward = [&](int k) {
      list.push_back({ActionKind::B, chunk(k, false) * p + r, microbatch(k)});
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
