// looped-bfs (breadth-first pipeline, Lamy-Poirier 2023): each rank holds v
// stage chunks on the loop map (stage c * p + r on rank r) and runs every
// micro-batch's forward of chunk 0, then of chunk 1, ..., then the backwards
// chunk by chunk in reverse. m micro-batches of every chunk are in flight; in
// exchange each chunk's work comes as one long run (good for overlapping
// data-parallel communication). With v = 1 it is GPipe.
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule looped_bfs(const GeneratorOptions& options) {
  const int v = detail::check_options("looped-bfs", options, 2, {detail::kAnyVirtualStages});
  const int p = options.ranks, m = options.microbatches;
  Schedule s = detail::empty_schedule("looped-bfs", options, p * v, StageMap::Loop);
  for (int r = 0; r < p; ++r) {
    auto& list = s.actions[r];
    for (int c = 0; c < v; ++c)
      for (int mb = 0; mb < m; ++mb) list.push_back({ActionKind::F, c * p + r, mb});
    // Backwards mirror the forwards (as PyTorch's ScheduleLoopedBFS): the last
    // micro-batch forwarded is the first whose gradient is ready.
    for (int c = v - 1; c >= 0; --c)
      for (int mb = m - 1; mb >= 0; --mb) list.push_back({ActionKind::B, c * p + r, mb});
  }
  return s;
}

}  // namespace baton::schedule
