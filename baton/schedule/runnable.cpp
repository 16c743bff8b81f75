#include "baton/schedule/runnable.h"

#include <algorithm>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/clip_norm.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/sharding.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/tied_reduction.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {

Schedule lowered_schedule(const ScheduleSource& source) {
  if (!source.is_file()) return lower(generate(source.generator, source.options));
  Schedule s = load_schedule_file(source.file);
  try {
    if (!s.has_communication()) return lower(s);
    validate(s);
  } catch (const Error& e) {
    throw Error(baton::detail::concat(printable(source.file, 256), ": ", e.what()));
  }
  return s;
}

Schedule add_reductions(const Schedule& lowered, const ReductionOptions& options) {
  BATON_CHECK(options.dp >= 1, "[schedule.reduce_grad] dp must be >= 1, got ", options.dp);
  Schedule s = lowered;
  bool passed = false;  // whether a pass ran (each validates its result)
  // A file's CLIP_NORMs stand where add_clip_norm() puts them (validated: each
  // rank's last action, named by its lowest stage); they come off while the
  // other passes append, and go back last.
  const bool clips = options.clip || s.has_clip_norm();
  for (auto& list : s.actions) {
    list.erase(std::remove_if(list.begin(), list.end(),
                              [](const Action& a) { return a.kind == ActionKind::CLIP_NORM; }),
               list.end());
  }
  if (options.dp > 1) {
    if (!s.has_grad_reductions()) {
      const std::vector<int> buckets = options.buckets_per_stage.empty()
                                           ? std::vector<int>(static_cast<size_t>(s.stages), 1)
                                           : options.buckets_per_stage;
      s = add_grad_reductions(s, options.dp, buckets);
      passed = true;
    }
    if (!options.overlap_grad_reduce) {
      s = defer_grad_reductions(s);
      passed = true;
    }
    if (options.zero > 0) {
      s = add_sharding(s, options.zero, options.prefetch_unshard);
      passed = true;
    }
  }
  if (!s.has_tied_reductions()) {
    s = add_tied_reductions(s, options.tied);
    passed = true;
  }
  if (clips) {
    s = add_clip_norm(s);
    passed = true;
  }
  if (!passed) validate(s);
  return s;
}

Schedule runnable(const ScheduleSource& source, const ReductionOptions& options) {
  return add_reductions(lowered_schedule(source), options);
}

}  // namespace baton::schedule
