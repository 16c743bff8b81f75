// pipedream (PipeDream, Narayanan et al., SOSP 2019): 1F1B without a flush,
// with weight stashing. The order is 2bw's window (two_bw.cpp): one forward
// and one backward in turn on every rank, rank r's backwards p - r - 1
// micro-batches behind, carried across steps (Schedule::carries). What differs
// is the weights (runtime/weight_versions.h): every stage updates after each
// of its backwards, a micro-batch's backward runs on the version its forward
// used, so rank r keeps up to p - r versions (the first stage p).
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule pipedream(const GeneratorOptions& options) {
  return detail::no_flush_1f1b("pipedream", options);
}

}  // namespace baton::schedule
