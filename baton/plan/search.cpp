#include "baton/plan/search.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <queue>
#include <sstream>
#include <tuple>

#include "baton/core/error.h"
#include "baton/plan/schedules.h"
#include "baton/sim/stream_stats.h"

namespace baton::plan {

namespace {

constexpr int kRefusalsNamed = 8;  // (t, p, d) named in the error; the rest counted
// Pipelines of more (stage, micro-batch) pairs are not searched: a generated
// schedule (zb-h1, zb-v) of this size already takes a second to build.
constexpr long kMaxSimulatedCells = 1 << 20;

// The rules in the order they apply: a candidate is rejected by the first it
// fails, so when nothing is left the rule that removed the last candidates is
// the furthest any candidate got.
enum Rule {
  kTpFixed,
  kPpFixed,
  kDpFixed,
  kProfileNeedsT1,
  kTDividesHeads,
  kTTilesNodes,
  kPAtMostLayers,
  kDDividesBatch,
  kMicrobatchDivides,
  kScheduleNeedsP,
  kZeroNeedsD,
  kLayersPerChunk,
  kScheduleDefined,
  kSimulable,
  kMemory,
  kRuleCount
};
constexpr const char* kRuleNames[kRuleCount] = {
    "tp_fixed",
    "pp_fixed",
    "dp_fixed",
    "profile_needs_t_1",
    "t_does_not_divide_heads",
    "t_does_not_tile_nodes",
    "p_exceeds_layers",
    "d_does_not_divide_batch",
    "microbatch_does_not_divide",
    "schedule_needs_p_above_1",
    "zero_needs_d_above_1",
    "layers_fewer_than_stages",
    "schedule_undefined_for_m",
    "too_large_to_simulate",
    "out_of_memory",
};

std::vector<int> divisors(int n) {
  std::vector<int> out;
  for (long k = 1; k * k <= n; ++k) {
    if (n % k != 0) continue;
    out.push_back(static_cast<int>(k));
    if (k * k != n) out.push_back(static_cast<int>(n / k));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The recomputation modes searched: with a profile (measured without
// recomputation) only none.
std::vector<Recompute> recompute_modes(const PlanRequest& req) {
  if (req.profile) return {Recompute::Never};
  return req.recompute;
}

sim::CostModel costs_of(const PlanRequest& req, const Config& c) {
  return req.profile ? profiled_stage_costs(*req.profile, req.cluster, c)
                     : stage_costs(req.shape, req.cluster, c);
}

// Time added after the simulated pipeline: the exposed dp all-reduce, the
// tied exchange, and with a profile the optimizer step and ZeRO-1's gather.
double added_seconds(const PlanRequest& req, const Config& c, const sim::CostModel& costs) {
  if (!req.profile) {
    return dp_exposed_seconds(req.shape, req.cluster, c, costs) +
           tied_exchange_seconds(req.shape, req.cluster, c);
  }
  const double gradients = profiled_gradient_bytes(*req.profile, c);
  double added = exposed_seconds(gradient_allreduce_seconds(gradients, req.cluster, c), c, costs,
                                 req.cluster.overlap_grad_reduce) +
                 profiled_optimizer_seconds(*req.profile, c) + req.profile->step_overhead_s;
  // ZeRO's UNSHARD all-gathers the parameters (half an all-reduce's traffic),
  // charged whole: the prefetch hides one compute action's worth at most.
  if (c.zero > 0 && c.d > 1) added += gradient_allreduce_seconds(gradients, req.cluster, c) / 2;
  return added;
}

double working_of(const PlanRequest& req, const Config& c) {
  return req.profile ? 0 : working_bytes(req.shape, c);
}

// What the simulator finds for a configuration, whatever its ZeRO setting
// (which changes only the parameter bytes).
struct Simulated {
  bool defined = false;
  double steady_step = 0, bubble_fraction = 0;
  std::vector<double> peak_activation_bytes;  // per rank
};

std::string simulation_key(const Config& c) {
  std::ostringstream key;
  key << c.t << ' ' << c.p << ' ' << c.d << ' ' << c.microbatch << ' ' << c.schedule << ' '
      << c.virtual_stages << ' ' << c.recompute << ' ' << c.selective;
  for (int n : c.stage_layers) key << ' ' << n;
  return key.str();
}

Simulated simulate(const PlanRequest& req, const Config& c) {
  const auto options = schedule::GeneratorOptions{}
                           .set_ranks(c.p)
                           .set_microbatches(c.microbatches)
                           .set_virtual_stages(c.virtual_stages);
  schedule::Schedule generated;
  std::unique_ptr<sim::ActionSource> source;
  Simulated out;
  try {
    if (sim::has_closed_form(c.schedule)) {
      source = sim::closed_form_source(c.schedule, options);
    } else {
      generated = schedule::generate(c.schedule, options);
      source = sim::schedule_source(generated);
    }
  } catch (const Error&) {
    return out;
  }
  const sim::Stats stats = sim::simulate_stats(*source, costs_of(req, c));
  out.defined = true;
  out.steady_step = stats.steady_step;
  out.bubble_fraction = stats.bubble_fraction;
  out.peak_activation_bytes = stats.peak_activation_bytes;
  return out;
}

void finish(const PlanRequest& req, Plan& plan) {
  if (!req.profile) {
    const double per_gpu = plan.step_s * req.cluster.gpus * 1e12;
    plan.model_tflops_per_gpu = step_flops(req.shape, req.batch, false) / per_gpu;
    plan.hardware_tflops_per_gpu =
        (step_flops(req.shape, req.batch, plan.config.recompute) +
         (plan.config.selective ? req.shape.layers * attention_core_flops(req.shape, req.batch)
                                : 0)) /
        per_gpu;
    plan.mfu = plan.model_tflops_per_gpu / req.cluster.peak_tflops;
    plan.hfu = plan.hardware_tflops_per_gpu / req.cluster.peak_tflops;
  }
  plan.sequences_per_s = req.batch / plan.step_s;
}

// The simulated plan of `c`: its step and the memory of its busiest rank.
Plan plan_of(const PlanRequest& req, const Config& c, const Simulated& s) {
  const sim::CostModel costs = costs_of(req, c);
  Plan plan;
  plan.config = c;
  for (int r = 0; r < c.p; ++r) {
    double params = 0;
    for (int stage : stages_of_rank(c, r)) params += costs.stages[stage].parameter_bytes;
    plan.memory_bytes = std::max(plan.memory_bytes, params + s.peak_activation_bytes[r]);
  }
  plan.memory_bytes += working_of(req, c);
  plan.bubble_fraction = s.bubble_fraction;
  plan.step_s = s.steady_step + added_seconds(req, c, costs);
  plan.simulated = true;
  finish(req, plan);
  return plan;
}

bool faster(const Plan& a, const Plan& b) {
  return std::tie(a.step_s, a.memory_bytes) < std::tie(b.step_s, b.memory_bytes);
}

// Which rule removed the last candidates, and an example of it.
struct Removal {
  int deepest = -1;
  std::string example;
  void note(int rule, const std::string& why) {
    if (rule > deepest) deepest = rule, example = why;
  }
};

// The stage cuts searched for p v stages.
std::vector<std::vector<int>> cuts_of(const PlanRequest& req, int layers, int stages,
                                      bool recompute) {
  if (req.profile) return {{}};  // partition::uniform, as baton train --balance uniform
  std::vector<std::vector<int>> out;
  if (layers % stages == 0) out.push_back({});
  // The logits in blocks' worth of time: 3 passes against 3 (4 recomputing).
  const double extra = 3 * logits_forward_flops(req.shape, 1) /
                       ((recompute ? 4 : 3) * layer_forward_flops(req.shape, 1));
  std::vector<int> balanced = balanced_stage_layers(layers, stages, extra);
  if (layers % stages != 0 || balanced != std::vector<int>(stages, layers / stages))
    out.push_back(std::move(balanced));
  return out;
}

// The first rule of a candidate's own (kScheduleNeedsP to kSimulable) that
// it fails, and why; kRuleCount when it passes them all.
int candidate_rule(const Config& c, const SearchedSchedule& traits, int layers, std::string& why) {
  const long stages = static_cast<long>(c.p) * c.virtual_stages;
  const int m = c.microbatches;
  // At p=1 every schedule is the registry's first (1f1b): search that one.
  if (c.p == 1 && &traits != &searched_schedules().front()) {
    why = "at p=1 every schedule is 1f1b";
    return kScheduleNeedsP;
  }
  if (c.zero > 0 && c.d == 1) {
    why = "ZeRO-" + std::to_string(c.zero) + " needs d > 1";
    return kZeroNeedsD;
  }
  if (stages > layers) {
    why = std::to_string(stages) + " stages for " + std::to_string(layers) + " layers";
    return kLayersPerChunk;
  }
  if (m < traits.min_m_per_rank * c.p) {
    why = c.schedule + " needs m >= " + std::to_string(traits.min_m_per_rank) +
          "p = " + std::to_string(traits.min_m_per_rank * c.p);
    return kScheduleDefined;
  }
  if (traits.equal_groups && m % std::max(1, m / c.p) != 0) {
    why = c.schedule + " needs m in equal groups of at least p";
    return kScheduleDefined;
  }
  if (stages * m > kMaxSimulatedCells) {
    why = std::to_string(stages * m) + " (stage, micro-batch) pairs";
    return kSimulable;
  }
  return kRuleCount;
}

}  // namespace

std::string describe(const Config& c) {
  std::ostringstream out;
  out << "t=" << c.t << " p=" << c.p << " d=" << c.d << " b=" << c.microbatch
      << " m=" << c.microbatches << " " << c.schedule;
  if (c.virtual_stages > 1) out << " v=" << c.virtual_stages;
  out << (c.recompute ? " recompute" : "") << (c.selective ? " selective" : "");
  if (c.zero > 0) out << " zero" << c.zero;
  if (!c.stage_layers.empty()) {
    out << " layers=";
    for (size_t i = 0; i < c.stage_layers.size(); ++i) out << (i ? "," : "") << c.stage_layers[i];
  }
  return out.str();
}

namespace {

// Bytes as GB, rounded up to 0.1.
double gb(double bytes) {
  return std::ceil(bytes / 1e8) / 10;
}

// The request's own checks (before any candidate); the schedules searched.
std::vector<std::string> checked_schedules(const PlanRequest& req) {
  if (!req.profile) check_shape(req.shape);
  const Cluster& cl = req.cluster;
  BATON_CHECK(cl.gpus >= 1 && cl.gpus_per_node >= 1 && req.batch >= 1,
              "[plan] --gpus, --gpus-per-node and --batch must be at least 1 (gpus=", cl.gpus,
              ", gpus-per-node=", cl.gpus_per_node, ", batch=", req.batch, ")");
  BATON_CHECK(req.max_memory_fraction > 0 && req.max_memory_fraction <= 1,
              "[plan] --max-memory-fraction ", req.max_memory_fraction, " is not in (0, 1]");
  BATON_CHECK(req.top >= 1, "[plan] --top ", req.top, " must be at least 1");
  for (const auto& [flag, value] :
       {std::pair<const char*, int>{"--tp", req.tp}, {"--pp", req.pp}, {"--dp", req.dp}}) {
    BATON_CHECK(value >= 0 && (value == 0 || cl.gpus % value == 0), "[plan] ", flag, " ", value,
                " does not divide --gpus ", cl.gpus);
  }
  const long fixed =
      static_cast<long>(std::max(1, req.tp)) * std::max(1, req.pp) * std::max(1, req.dp);
  BATON_CHECK(
      cl.gpus % fixed == 0 && (req.tp == 0 || req.pp == 0 || req.dp == 0 || fixed == cl.gpus),
      "[plan] --tp x --pp x --dp = ", fixed, " (unset: 1) ",
      req.tp && req.pp && req.dp ? "is not" : "does not divide", " --gpus ", cl.gpus);
  const std::vector<std::string> names =
      req.schedules.empty() ? searched_schedule_names() : req.schedules;
  for (const std::string& name : names) {
    BATON_CHECK(find_searched_schedule(name), "[plan] schedule \"", name,
                "\" is not searched by the planner");
  }
  return names;
}

// The first (t, p, d) rule the grid point fails (kRuleCount: none), and why.
int grid_rule(const PlanRequest& req, int t, int p, int d, int layers, std::string& why) {
  const Cluster& cl = req.cluster;
  int rule = kRuleCount;
  auto fails = [&](int r, bool failed, const std::string& text) {
    if (rule == kRuleCount && failed) rule = r, why = text;
  };
  fails(kTpFixed, req.tp > 0 && t != req.tp, "t=" + std::to_string(t) + " is not --tp");
  fails(kPpFixed, req.pp > 0 && p != req.pp, "p=" + std::to_string(p) + " is not --pp");
  fails(kDpFixed, req.dp > 0 && d != req.dp, "d=" + std::to_string(d) + " is not --dp");
  fails(kProfileNeedsT1, req.profile && t != 1,
        "t=" + std::to_string(t) + " is not 1 (a profile is one device's)");
  fails(kTDividesHeads, !req.profile && req.shape.heads % t != 0,
        "t=" + std::to_string(t) + " does not divide heads=" + std::to_string(req.shape.heads));
  fails(kTTilesNodes, cl.gpus_per_node % t != 0 && t % cl.gpus_per_node != 0,
        "t=" + std::to_string(t) + " neither divides nor is a multiple of gpus-per-node=" +
            std::to_string(cl.gpus_per_node));
  fails(kPAtMostLayers, p > layers,
        "p=" + std::to_string(p) + " exceeds the " + (req.profile ? "profiled " : "") +
            "layers=" + std::to_string(layers));
  fails(kDDividesBatch, req.batch % d != 0,
        "d=" + std::to_string(d) + " does not divide batch=" + std::to_string(req.batch));
  fails(kMicrobatchDivides,
        req.microbatch > 0 && (req.batch % d != 0 || (req.batch / d) % req.microbatch != 0),
        "--microbatch " + std::to_string(req.microbatch) + " does not divide batch / d = " +
            std::to_string(req.batch) + " / " + std::to_string(d));
  return rule;
}

// The search's state: what was rejected and why, and the candidates whose
// bounds fit, to simulate.
struct Search {
  Search(const PlanRequest& request, int layer_count, double bytes_limit)
      : req(request), layers(layer_count), limit(bytes_limit) {
    smallest.memory_bytes = INFINITY;
  }

  const PlanRequest& req;
  int layers;
  double limit;  // bytes a GPU may use
  PlanResult result;
  Removal removal;
  std::string refused;  // why the first (t, p, d) failed, for the error
  int refused_count = 0;
  int allowed = 0;
  Plan smallest;              // the least memory any candidate needs
  std::vector<Plan> fitting;  // candidates whose bounds fit, to simulate

  void reject(int rule, const std::string& why) {
    ++result.rejected[kRuleNames[rule]];
    removal.note(rule, why);
  }
  void estimate_grid_point(int t, int p, int d, const std::vector<std::string>& names);
  void check_something_fits() const;
  void simulate_in_order();
};

// Every candidate of one allowed (t, p, d): its bounds, kept when they fit.
void Search::estimate_grid_point(int t, int p, int d, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const SearchedSchedule& traits = *find_searched_schedule(name);
    std::vector<int> vs;
    if (traits.chunks > 0) {
      vs.push_back(traits.chunks);
    } else {
      for (int v = 2; static_cast<long>(p) * v <= std::max(layers, 2 * p); ++v) vs.push_back(v);
    }
    for (int b : divisors(req.batch / d)) {
      if (req.microbatch > 0 && b != req.microbatch) continue;
      const int m = req.batch / d / b;
      for (const Recompute mode : recompute_modes(req)) {
        const bool recompute = mode == Recompute::Always;
        for (int v : vs) {
          const long stages = static_cast<long>(p) * v;
          const std::vector<std::vector<int>> cuts =
              stages <= layers ? cuts_of(req, layers, static_cast<int>(stages), recompute)
                               : std::vector<std::vector<int>>{{}};
          for (const std::vector<int>& cut : cuts) {
            for (int zero : req.zero) {
              ++result.candidates;
              Plan e;
              e.config = Config{t, p, d, b, m, name, v, recompute, zero, cut};
              e.config.selective = mode == Recompute::Selective;
              std::string why;
              const int rule = candidate_rule(e.config, traits, layers, why);
              if (rule != kRuleCount) {
                reject(rule, describe(e.config) + ": " + why);
                continue;
              }
              const sim::CostModel costs = costs_of(req, e.config);
              const Estimate est = estimate(costs, e.config, added_seconds(req, e.config, costs),
                                            working_of(req, e.config));
              e.step_s = est.step_s;
              e.memory_bytes = est.memory_bytes;
              finish(req, e);
              result.estimates.push_back(e);
              if (e.memory_bytes < smallest.memory_bytes) smallest = e;
              if (e.memory_bytes > limit) {
                reject(kMemory, describe(e.config));
                continue;
              }
              fitting.push_back(e);
            }
          }
        }
      }
    }
  }
}

// One line naming why nothing is left, when nothing is.
void Search::check_something_fits() const {
  const Cluster& cl = req.cluster;
  std::string refused_named = refused;
  if (refused_count > kRefusalsNamed)
    refused_named += "; and " + std::to_string(refused_count - kRefusalsNamed) + " more";
  BATON_CHECK(removal.deepest != kMicrobatchDivides || allowed > 0, "[plan] --microbatch ",
              req.microbatch, " divides batch / d for no allowed d (batch=", req.batch,
              "; microbatch_does_not_divide removed the last candidates)");
  if (allowed == 0 && removal.deepest > kDpFixed) {
    BATON_CHECK(false, "[plan] no (t, p, d) with t*p*d = ", cl.gpus,
                " GPUs is allowed (t must divide heads and tile nodes, p be at most the layers, "
                "d divide batch; last rule: ",
                kRuleNames[removal.deepest], "): ", refused_named);
  }
  if (fitting.empty() && removal.deepest == kMemory) {
    BATON_CHECK(
        false, "[plan] no configuration fits in ", cl.memory_gb, " GB per GPU",
        req.max_memory_fraction < 1 ? " x --max-memory-fraction " : "",
        req.max_memory_fraction < 1 ? detail::concat(req.max_memory_fraction) : std::string(),
        "; the smallest needs ", gb(smallest.memory_bytes), " GB per GPU (",
        describe(smallest.config), "; out_of_memory removed the last candidates)");
  }
  BATON_CHECK(!fitting.empty(), "[plan] no plan is left: ",
              removal.deepest >= 0 ? kRuleNames[removal.deepest] : "nothing",
              " removed the last candidates (", removal.example, ")");
}

// Simulate in order of the step bound until no bound is below the top-th
// best simulated step.
void Search::simulate_in_order() {
  const Cluster& cl = req.cluster;
  std::sort(fitting.begin(), fitting.end(), faster);
  std::map<std::string, Simulated> simulated;
  std::priority_queue<double> top_steps;  // the `top` fastest simulated steps
  Plan smallest_simulated;
  smallest_simulated.memory_bytes = INFINITY;
  for (size_t k = 0; k < fitting.size(); ++k) {
    const Config& c = fitting[k].config;
    if (static_cast<int>(top_steps.size()) >= req.top && fitting[k].step_s > top_steps.top()) {
      result.rejected["slower_than_top_plans"] += fitting.size() - k;
      break;
    }
    const std::string key = simulation_key(c);
    auto it = simulated.find(key);
    if (it == simulated.end()) {
      if (result.simulated >= req.simulate_limit) {
        ++result.rejected["beyond_simulate_limit"];
        continue;
      }
      ++result.simulated;
      it = simulated.emplace(key, simulate(req, c)).first;
    }
    if (!it->second.defined) {
      reject(kScheduleDefined, describe(c) + ": the generator refused it");
      continue;
    }
    const Plan plan = plan_of(req, c, it->second);
    if (plan.memory_bytes < smallest_simulated.memory_bytes) smallest_simulated = plan;
    if (plan.memory_bytes > limit) {
      ++result.rejected["out_of_memory"];
      continue;
    }
    result.plans.push_back(plan);
    top_steps.push(plan.step_s);
    if (static_cast<int>(top_steps.size()) > req.top) top_steps.pop();
  }
  BATON_CHECK(!result.plans.empty(), "[plan] no simulated configuration fits in ", cl.memory_gb,
              " GB per GPU", req.max_memory_fraction < 1 ? " x --max-memory-fraction " : "",
              req.max_memory_fraction < 1 ? detail::concat(req.max_memory_fraction) : std::string(),
              "; the smallest needs ", gb(smallest_simulated.memory_bytes), " GB per GPU (",
              describe(smallest_simulated.config), ")");
}

}  // namespace

PlanResult plan(const PlanRequest& req) {
  const int layers = req.profile ? static_cast<int>(req.profile->layers.size()) : req.shape.layers;
  const std::vector<std::string> names = checked_schedules(req);
  const Cluster& cl = req.cluster;
  Search search(req, layers, cl.memory_gb * 1e9 * req.max_memory_fraction);
  for (int t : divisors(cl.gpus)) {
    for (int p : divisors(cl.gpus / t)) {
      const int d = cl.gpus / t / p;
      std::string why;
      const int rule = grid_rule(req, t, p, d, layers, why);
      if (rule != kRuleCount) {
        const std::string grid =
            "(" + std::to_string(t) + "," + std::to_string(p) + "," + std::to_string(d) + ")";
        // Profiles name their own layer rule, as before.
        ++search.result.rejected[rule == kPAtMostLayers && req.profile ? "p_exceeds_profiled_layers"
                                                                       : kRuleNames[rule]];
        search.removal.note(rule, grid + ": " + why);
        if (rule > kDpFixed && ++search.refused_count <= kRefusalsNamed)
          search.refused += (search.refused.empty() ? "" : "; ") + grid + ": " + why;
        continue;
      }
      ++search.allowed;
      search.estimate_grid_point(t, p, d, names);
    }
  }
  search.check_something_fits();
  search.simulate_in_order();
  PlanResult& result = search.result;
  std::sort(result.plans.begin(), result.plans.end(), faster);
  return result;
}

}  // namespace baton::plan
