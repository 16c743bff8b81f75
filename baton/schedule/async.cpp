// async (AMPNet-style, Gaunt et al. 2017; seed 001's "asynchronous"
// pipeline): 1F1B without a flush and without weight stashing. The order is
// 2bw's window (two_bw.cpp); every stage updates after each of its backwards,
// as pipedream does, but a backward runs on the weights as they are when it
// runs, not on those its forward used (runtime/weight_versions.h): one
// version per stage, and gradients mixing the forward's activations with
// later weights.
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule async(const GeneratorOptions& options) {
  return detail::no_flush_1f1b("async", options);
}

}  // namespace baton::schedule
