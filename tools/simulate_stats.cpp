#include "tools/simulate_stats.h"

#include "baton/sim/stream_stats.h"

namespace baton::cli {

nlohmann::json simulate_stats_json(const std::string& name,
                                   const schedule::GeneratorOptions& options,
                                   const UniformCosts& c) {
  schedule::Schedule generated;  // only for schedules without a closed form
  std::unique_ptr<sim::ActionSource> source;
  if (sim::has_closed_form(name)) {
    source = sim::closed_form_source(name, options);
  } else {
    generated = schedule::generate(name, options);
    source = sim::schedule_source(generated);
  }
  const sim::Stats st =
      sim::simulate_stats(*source, sim::uniform_cost_model(*source, c.tf, c.tb, c.tw, c.comm));
  return {
      {"schedule", source->name()},
      {"pp", source->ranks()},
      {"microbatches", source->microbatches()},
      {"stages", source->stages()},
      {"virtual", source->stages_per_rank()},
      {"map", std::string(schedule::to_string(source->map()))},
      {"makespan", st.makespan},
      {"steady_step", st.steady_step},
      {"bubble_fraction", st.bubble_fraction},
      {"busy", st.busy},
      {"idle_within_span", st.idle_within_span},
      {"peak_inflight", st.peak_inflight},
      {"peak_activation_bytes", st.peak_activation_bytes},
      {"parameter_bytes", st.parameter_bytes},
      {"actions", source->lowered_action_count()},
  };
}

}  // namespace baton::cli
