#include "tools/simulate_stats.h"

#include "baton/schedule/lower.h"
#include "baton/sim/simulator.h"
#include "baton/sim/stream_stats.h"

namespace baton::cli {
namespace {

StatsOnly finish(const sim::ActionSource& source, const UniformCosts& c) {
  StatsOnly out;
  out.stats =
      sim::simulate_stats(source, sim::uniform_cost_model(source, c.tf, c.tb, c.tw, c.comm));
  out.shape = {source.name(),
               source.ranks(),
               source.microbatches(),
               source.stages(),
               source.stages_per_rank(),
               source.map(),
               source.lowered_action_count()};
  return out;
}

}  // namespace

StatsOnly simulate_stats_only(const std::string& name, const schedule::GeneratorOptions& options,
                              const UniformCosts& c) {
  StatsOnly out;
  if (!sim::has_closed_form(name)) {
    const schedule::Schedule generated = schedule::generate(name, options);
    if (generated.carries) {
      // A window without a flush runs unrolled over steps (sim/simulator.h),
      // which the stats-only stepper does not do.
      const schedule::Schedule lowered = schedule::lower(generated);
      out.stats =
          sim::simulate(lowered, sim::uniform_cost_model(lowered, c.tf, c.tb, c.tw, c.comm)).stats;
      out.shape = {generated.name,
                   generated.ranks,
                   generated.microbatches,
                   generated.stages,
                   generated.stages_per_rank(),
                   generated.map,
                   lowered.action_count()};
      return out;
    }
    const auto source = sim::schedule_source(generated);
    return finish(*source, c);
  }
  return finish(*sim::closed_form_source(name, options), c);
}

nlohmann::json simulate_json(const SimulatedShape& shape, const sim::Stats& st,
                             const SimulatedGrid& grid) {
  auto per_rank = [&](const std::vector<double>& v) {
    return v.empty() ? std::vector<double>(static_cast<size_t>(shape.ranks), 0.0) : v;
  };
  return {
      {"schedule", shape.name},
      {"pp", shape.ranks},
      {"microbatches", shape.microbatches},
      {"stages", shape.stages},
      {"virtual", shape.stages_per_rank},
      {"map", std::string(schedule::to_string(shape.map))},
      {"makespan", st.makespan},
      {"steady_step", st.steady_step},
      {"bubble_fraction", st.bubble_fraction},
      {"busy", st.busy},
      {"idle_within_span", st.idle_within_span},
      {"peak_inflight", st.peak_inflight},
      {"peak_activation_bytes", st.peak_activation_bytes},
      {"parameter_bytes", st.parameter_bytes},
      {"dp", grid.dp},
      {"tp", grid.tp},
      {"world_size", static_cast<long>(grid.dp) * shape.ranks * grid.tp},
      {"buckets_per_stage", grid.buckets_per_stage},
      {"reduce_grad", per_rank(st.reduce_grad)},
      {"exposed_reduction", per_rank(st.exposed_reduction)},
      {"tp_comm_per_action", grid.tp_comm_per_action},
      {"actions", shape.actions},
  };
}

}  // namespace baton::cli
