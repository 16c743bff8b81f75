#include "baton/pipeline/pipeline_plan.h"

#include <algorithm>
#include <optional>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/partition/balance.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"

namespace baton {

namespace {

// zb-auto's costs from profiled layers cut by `partition`: the slowest
// stage's forward and backward (its uniform cost model charges every stage
// alike), the backward split evenly between I and W (a profile times the
// whole backward; for Linear layers the two are one matrix product each).
schedule::ZbAutoCosts zb_auto_costs(const std::vector<partition::LayerCost>& layers,
                                    const partition::Partition& partition) {
  schedule::ZbAutoCosts costs;
  costs.f = costs.i = 0;
  for (int stage = 0; stage < partition.stages(); ++stage) {
    double f = 0, b = 0;
    for (int l = partition.first_layer(stage); l < partition.end_layer(stage); ++l) {
      f += layers[l].forward_time;
      b += layers[l].backward_time;
    }
    costs.f = std::max(costs.f, f);
    costs.i = std::max(costs.i, b / 2);
  }
  // Profiles of tiny layers can read 0; zb-auto needs F and I above 0.
  costs.f = std::max(costs.f, 1e-9);
  costs.i = std::max(costs.i, 1e-9);
  costs.w = costs.i;
  return costs;
}

// The words of one plan's errors.
struct Words {
  const PipelineOptions& o;
  const PlanWording& w;

  bool from_file() const { return !o.schedule_file().empty(); }
  std::string file() const { return printable(o.schedule_file(), 256); }
  // The schedule as the user chose it.
  std::string schedule(const schedule::Schedule& s) const {
    if (from_file()) return "schedule file " + file();
    return (w.flags ? "--schedule " : "schedule ") + s.name;
  }
};

// The lowered schedule (its reductions come once the stages are built): the
// file's, or the generator's with `generator`.
schedule::Schedule make_schedule(const Words& say, int pp,
                                 const schedule::GeneratorOptions& generator) {
  const PipelineOptions& o = say.o;
  if (!say.from_file())
    return schedule::lowered_schedule(schedule::ScheduleSource::generated(o.schedule(), generator));
  schedule::Schedule s =
      schedule::lowered_schedule(schedule::ScheduleSource::from_file(o.schedule_file()));
  BATON_CHECK(s.ranks == pp, say.w.tag, " schedule file ", say.file(), " has ", s.ranks,
              " ranks but pp=", pp, "; a schedule file has one row per pipeline rank (",
              say.w.flags ? detail::concat("pass --pp ", s.ranks, " and --nproc ", s.ranks)
                          : detail::concat("set pp(", s.ranks, ")"),
              ")");
  BATON_CHECK(s.microbatches == o.microbatches(), say.w.tag, " schedule file ", say.file(),
              " runs ", s.microbatches, " micro-batches but ",
              say.w.flags ? "--microbatches" : "microbatches", " is ", o.microbatches(),
              "; set it to the file's");
  return s;
}

void check_stage_count(const Words& say, const nn::ModelSpec& model, const std::string& schedule,
                       int pp, int stages) {
  const std::string name = say.w.flags ? model.name : "\"" + model.name + "\"";
  BATON_CHECK(stages <= model.num_layers(), say.w.tag, " ", schedule, " with pp=", pp, " makes ",
              stages, " stages but model ", name, " has only ", model.num_layers(),
              " layers; every stage needs at least one layer",
              say.w.flags ? " (raise --layers or lower --pp/--virtual)" : "");
}

// A schedule without a flush (2bw, pipedream, async, pipemare, or a file
// with carries=1; runtime/weight_versions.h) and what it cannot run with.
void check_no_flush(const Words& say, const schedule::Schedule& s, const nn::ModelSpec& model,
                    const topology::Topology& grid) {
  if (!s.carries) return;
  const PipelineOptions& o = say.o;
  const std::string which = say.w.tag + " " + say.schedule(s) + " has no flush between steps";
  BATON_CHECK(
      o.zero() < 2, which, ", so no point where a step's gradients are whole to reduce-scatter; ",
      say.w.flags ? "--zero " : "ZeRO-", o.zero(), " needs a schedule with a flush (e.g. 1f1b)");
  BATON_CHECK(grid.dp() == 1 && grid.tp() == 1, which, " and runs with ",
              say.w.flags ? "--dp 1 --tp 1" : "dp=1 and tp=1", " only, got dp=", grid.dp(),
              " tp=", grid.tp(), " (data parallelism reduces whole steps' gradients)");
  BATON_CHECK(o.precision() == Precision::Fp32, which,
              " and runs in fp32 only (its weights change within a step, and a step's weight "
              "casts would go stale); drop ",
              say.w.flags ? "--precision " : "precision ", to_string(o.precision()));
  BATON_CHECK(model.tied.empty(), which, " and cannot ",
              say.w.flags ? "--tie-embeddings" : "train tied weights",
              ": the tied copies' gradients are summed where a step's gradients are whole, and it "
              "has no such point (use a schedule with a flush, e.g. 1f1b)");
}

}  // namespace

PipelinePlan plan_pipeline(const PipelineOptions& o, const nn::ModelSpec& model,
                           const topology::Topology& grid, const LayerCostsFn& costs,
                           const PlanWording& wording) {
  const Words say{o, wording};
  const int pp = grid.pp();
  const bool zb_auto = schedule::takes_measured_costs(o.schedule()) && !say.from_file();
  const bool cuts_by_costs = partition::needs_layer_costs(o.balance());
  std::optional<std::vector<partition::LayerCost>> measured;
  if (costs && zb_auto) {
    measured = costs("schedule \"zb-auto\" searches with");
  } else if (costs && cuts_by_costs) {
    measured = costs("balance \"" + o.balance() + "\" cuts by");
  }
  // The cut into `stages`: the balance's, by the measured costs where it
  // reads them; uniform's where it would read costs not measured.
  auto cut = [&](int stages) {
    partition::BalanceOptions options;
    options.set_activations_in_flight(partition::one_f_one_b_in_flight(stages));
    const bool by_costs = cuts_by_costs && measured;
    return partition::balance(
        cuts_by_costs && !measured ? "uniform" : o.balance(),
        by_costs ? *measured : std::vector<partition::LayerCost>(model.num_layers()), stages,
        options);
  };
  auto generator = schedule::GeneratorOptions{}
                       .set_ranks(pp)
                       .set_microbatches(o.microbatches())
                       .set_virtual_stages(o.virtual_stages());
  // zb-auto searches with this model's costs, so its cut (one stage per
  // rank) comes first; every other schedule decides the stage count, and
  // the cut follows.
  PipelinePlan plan;
  if (zb_auto) {
    check_stage_count(say, model, say.w.flags ? "--schedule zb-auto" : "schedule zb-auto", pp, pp);
    plan.partition = cut(pp);
    if (measured) generator.set_zb_auto(zb_auto_costs(*measured, plan.partition));
  }
  plan.schedule = make_schedule(say, pp, generator);
  const int stages = plan.schedule.stages;
  check_stage_count(say, model, say.schedule(plan.schedule), pp, stages);
  if (!zb_auto) plan.partition = cut(stages);
  BATON_ASSERT(plan.partition.stages() == stages, "zb-auto made ", stages, " stages for pp=", pp);
  check_no_flush(say, plan.schedule, model, grid);
  // Skip connections whose two layers land on different stages become the
  // schedule's: transfers straight from one stage's rank to the other's (a
  // file declaring others is refused). They follow the cut, so a stand-in
  // cut (costs not measured) adds none.
  if (!cuts_by_costs || measured)
    plan.schedule = schedule::with_skips(plan.schedule, nn::stage_skips(model, plan.partition));
  schedule::ReductionOptions& r = plan.reductions;
  r.set_dp(grid.dp()).set_overlap_grad_reduce(o.overlap_grad_reduce());
  r.set_zero(o.zero()).set_prefetch_unshard(o.prefetch_unshard());
  // fp16's loss scale rides on the clip's norm: an overflow anywhere is a non-finite norm.
  r.set_clip(schedules_clip_norm(o));
  // Tied weights sum their copies' gradients.
  for (const auto& copies : model.tied) {
    r.tied.emplace_back();
    for (const nn::TiedParameter& copy : copies)
      r.tied.back().push_back(plan.partition.stage_of_layer(copy.layer));
  }
  // Every reduction rule (a file's own reductions stay; the executor checks
  // its REDUCE_GRADs against the built stages' buckets).
  schedule::add_reductions(plan.schedule, r);
  return plan;
}

}  // namespace baton
