// forward_only(): evaluation as a schedule of the IR (issue 9), so that the
// executor runs no hand-coded order. See generator.h.
#include <algorithm>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {

Schedule forward_only(const Schedule& training, int microbatches) {
  BATON_CHECK(microbatches >= 1 && microbatches <= kMaxMicrobatches,
              "[schedule.forward_only] micro-batches must be in [1, ", kMaxMicrobatches, "], got ",
              microbatches);
  const Placement placement(training);
  Schedule out;
  out.name = training.name + "/forward";
  out.ranks = training.ranks;
  out.stages = training.stages;
  out.microbatches = microbatches;
  out.map = training.map;
  out.forward_only = true;
  out.skips = training.skips;
  out.actions.resize(training.ranks);
  for (int s = 0; s < training.stages; ++s) {
    for (int mb = 0; mb < microbatches; ++mb) {
      const int rank = placement.rank_of(s, mb % training.microbatches);
      BATON_ASSERT(rank >= 0, "stage ", s, " has no rank in schedule ", training.name);
      out.actions[rank].push_back({ActionKind::F, s, mb});
    }
  }
  validate(out);
  return out;
}

}  // namespace baton::schedule
