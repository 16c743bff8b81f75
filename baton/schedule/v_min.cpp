// v-min (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS
// 2024): the V-shaped schedule of least activation memory in the paper's
// family. Two stage chunks per rank in a V (rank r holds stages r and
// 2p - 1 - r), backward split into I and W.
//
// Construction, after the paper's building blocks: one micro-batch's block
// places its 6 passes per rank (F, I, W of both chunks) with unit costs on a
// clock of period 6, each pass at the earliest time its input is ready whose
// slot modulo 6 is still free on its rank: forwards down the V, then input
// backwards up it, then the weight backwards. Micro-batch k's block starts at
// 6k, so blocks interlock without collisions, and each rank's list is its
// passes sorted by time (the simulator and runtime then squeeze out the idle
// slots of warm-up and cool-down). A chunk is held from its F to its W for
// its lifespan in the block, and the lifespans of a rank's two chunks add up
// to about 4p units (the V balances them), so a rank holds about 4p / 6
// chunks. The paper's table gives (p + 4) / 3 micro-batches' worth of a full
// stage (integer division), 1F1B's p; tests hold every rank to
// 2 * ((p + 4) / 3) chunks. With F = I = W per chunk the step exceeds the work
// by about 2/3 of 1F1B's bubble; with unequal costs the tight block waits more.
// Defined for every p and m >= 1.
#include <algorithm>

#include "baton/schedule/generator.h"

namespace baton::schedule {
namespace {

constexpr int kPeriod = 6;  // unit-cost passes per rank per micro-batch

struct Timed {
  long long time;
  Action action;
};

}  // namespace

int v_min_peak_chunks(int ranks) {
  return 2 * ((ranks + 4) / 3);
}

Schedule v_min(const GeneratorOptions& options) {
  detail::check_options("v-min", options, 2, {2});
  const int p = options.ranks, m = options.microbatches, stages = 2 * p;
  auto rank_of = [p](int s) { return s < p ? s : 2 * p - 1 - s; };

  // The building block: start times of each stage's F, I and W.
  std::vector<std::vector<char>> taken(p, std::vector<char>(kPeriod, 0));
  auto place = [&](int stage, int ready) {
    std::vector<char>& slots = taken[rank_of(stage)];
    while (slots[ready % kPeriod]) ++ready;
    slots[ready % kPeriod] = 1;
    return ready;
  };
  std::vector<int> f(stages), i(stages), w(stages);
  for (int s = 0; s < stages; ++s) f[s] = place(s, s == 0 ? 0 : f[s - 1] + 1);
  for (int s = stages - 1; s >= 0; --s) i[s] = place(s, s == stages - 1 ? f[s] + 1 : i[s + 1] + 1);
  for (int s = stages - 1; s >= 0; --s) w[s] = place(s, i[s] + 1);

  std::vector<std::vector<Timed>> timed(p);
  for (int mb = 0; mb < m; ++mb) {
    const long long start = static_cast<long long>(mb) * kPeriod;
    for (int s = 0; s < stages; ++s) {
      auto& list = timed[rank_of(s)];
      list.push_back({start + f[s], {ActionKind::F, s, mb}});
      list.push_back({start + i[s], {ActionKind::I, s, mb}});
      list.push_back({start + w[s], {ActionKind::W, s, mb}});
    }
  }
  Schedule out = detail::empty_schedule("v-min", options, stages, StageMap::V);
  for (int r = 0; r < p; ++r) {
    // Times on one rank are distinct: each pass has its own slot modulo 6.
    std::sort(timed[r].begin(), timed[r].end(),
              [](const Timed& a, const Timed& b) { return a.time < b.time; });
    for (const Timed& t : timed[r]) out.actions[r].push_back(t.action);
  }
  return out;
}

}  // namespace baton::schedule
