// Timelines for the writer tests: a named schedule lowered and simulated
// under uniform costs (tf, tb, tw per rank and micro-batch, as the CLI takes them).
#pragma once

#include <string>

#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/sim/simulator.h"

namespace baton::trace::testing {

inline Timeline simulated_timeline(const std::string& name, int ranks, int microbatches,
                                   double tf = 1, double tb = 2, double tw = 0, int v = 0) {
  const schedule::Schedule compute = schedule::generate(name, schedule::GeneratorOptions()
                                                                  .set_ranks(ranks)
                                                                  .set_microbatches(microbatches)
                                                                  .set_virtual_stages(v));
  const schedule::Schedule lowered = schedule::lower(compute);
  Timeline timeline = sim::simulate(lowered, sim::uniform_cost_model(lowered, tf, tb, tw)).timeline;
  timeline.title = name + " p=" + std::to_string(ranks) + " m=" + std::to_string(microbatches);
  return timeline;
}

}  // namespace baton::trace::testing
