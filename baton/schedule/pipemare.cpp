// pipemare (PipeMare, Yang et al., MLSys 2021): asynchronous 1F1B without a
// flush and without weight stashing, async's order and weights (async.cpp)
// plus two changes to the updates (runtime/pipemare.h): each stage's
// learning rate warms up from 1 / (tau + 1) of the caller's, and each
// backward runs on the weights extrapolated back by the stage's delay tau
// times its velocity, an estimate of the weights its forward used. tau, the
// stage's updates between a micro-batch's forward and its backward, is read
// off this order (update_delays.h): p - 1 - r on rank r.
#include "baton/schedule/generator.h"

namespace baton::schedule {

Schedule pipemare(const GeneratorOptions& options) {
  return detail::no_flush_1f1b("pipemare", options);
}

}  // namespace baton::schedule
