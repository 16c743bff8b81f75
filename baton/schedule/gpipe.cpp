// gpipe (Huang et al. 2019): every rank runs all m forwards, then all m
// backwards. Bubble (p - 1) / (m + p - 1); m micro-batches in flight.
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule gpipe(const GeneratorOptions& options) {
  detail::check_options("gpipe", options, 1);
  Schedule s = detail::empty_schedule("gpipe", options, options.ranks, StageMap::Loop);
  for (int r = 0; r < options.ranks; ++r) {
    for (int mb = 0; mb < options.microbatches; ++mb)
      s.actions[r].push_back({ActionKind::F, r, mb});
    for (int mb = 0; mb < options.microbatches; ++mb)
      s.actions[r].push_back({ActionKind::B, r, mb});
  }
  return s;
}

}  // namespace baton::schedule
