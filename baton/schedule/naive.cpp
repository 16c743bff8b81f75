// naive: one micro-batch at a time through the whole pipeline, forward then
// backward, before the next starts. Only one rank works at any moment: the
// idle-device baseline, bubble (p - 1) / p.
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule naive(const GeneratorOptions& options) {
  detail::check_options("naive", options, 1);
  Schedule s = detail::empty_schedule("naive", options, options.ranks, StageMap::Loop);
  for (int r = 0; r < options.ranks; ++r) {
    for (int mb = 0; mb < options.microbatches; ++mb) {
      s.actions[r].push_back({ActionKind::F, r, mb});
      s.actions[r].push_back({ActionKind::B, r, mb});
    }
  }
  return s;
}

}  // namespace baton::schedule
