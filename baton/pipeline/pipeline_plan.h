// plan_pipeline: the one planning function. From the options, the model and
// the dp x pp x tp grid it decides the schedule the ranks run, the cut of the
// layers into its stages and the reductions to add, or throws one error.
// Pipeline::build calls it on every rank; `baton train` calls it before any
// rank starts, so that a layout the ranks would refuse is refused there with
// the same rule. Nothing else repeats these rules.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "baton/nn/layer_spec.h"
#include "baton/partition/partition.h"
#include "baton/pipeline/pipeline_options.h"
#include "baton/schedule/runnable.h"
#include "baton/topology/topology.h"

namespace baton {

struct PipelinePlan {
  // Lowered, with the model's cross-stage skips, before its reductions.
  schedule::Schedule schedule;
  partition::Partition partition;
  // dp, ZeRO, clipping, overlap and the tied weights' stages; each stage's
  // bucket count comes once the stages are built (Pipeline::build).
  schedule::ReductionOptions reductions;
};

// How the errors name a setting: the library's options (`microbatches`)
// under "[pipeline]", or the command line's flags (`--microbatches`).
struct PlanWording {
  std::string tag = "[pipeline]";
  bool flags = false;

  static PlanWording command_line() { return {"[train.config]", true}; }
};

// Each layer's profiled costs; `why` says what reads them (for its error).
using LayerCostsFn = std::function<std::vector<partition::LayerCost>(const std::string& why)>;

// The plan for `grid` (its pp is the pipeline's rank count). `costs` is
// called only where the plan reads costs: zb-auto's search and the balances
// that cut by them (partition::needs_layer_costs). Without it (the command
// line's check before the ranks have measured anything) such a plan is
// exact in its schedule, its stage count and every rule, cut as "uniform"
// cuts, and without the skip connections' transfers (they follow the cut).
PipelinePlan plan_pipeline(const PipelineOptions& options, const nn::ModelSpec& model,
                           const topology::Topology& grid, const LayerCostsFn& costs = {},
                           const PlanWording& wording = {});

}  // namespace baton
