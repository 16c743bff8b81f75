#include "baton/plan/search.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "baton/core/error.h"
#include "baton/sim/stream_stats.h"

namespace baton::plan {

namespace {

constexpr int kRefusalsNamed = 8;  // (t, p, d) named in the error; the rest counted
// Pipelines of more (stage, micro-batch) pairs are not searched: a generated
// schedule (zb-h1, zb-v) of this size already takes a second to build.
constexpr long kMaxSimulatedCells = 1 << 20;

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

std::string describe(const Config& c) {
  std::ostringstream out;
  out << "t=" << c.t << " p=" << c.p << " d=" << c.d << " b=" << c.microbatch
      << " m=" << c.microbatches << " " << c.schedule << (c.recompute ? " recompute" : "")
      << (c.zero1 ? " zero1" : "");
  return out.str();
}

sim::CostModel costs_of(const PlanRequest& req, const Config& c) {
  return req.profile ? profiled_stage_costs(*req.profile, req.cluster, c)
                     : stage_costs(req.shape, req.cluster, c);
}

double exposed_dp_of(const PlanRequest& req, const Config& c, const sim::CostModel& costs) {
  if (!req.profile) return dp_exposed_seconds(req.shape, req.cluster, c, costs);
  return exposed_seconds(
      gradient_allreduce_seconds(profiled_gradient_bytes(*req.profile, c), req.cluster, c), c,
      costs);
}

Estimate estimate_of(const PlanRequest& req, const Config& c) {
  if (!req.profile) return estimate(req.shape, req.cluster, c);
  const sim::CostModel costs = costs_of(req, c);
  return estimate(costs, c, exposed_dp_of(req, c, costs), 0);
}

// Runs the schedule against the configuration's costs, or returns false when
// the schedule is not defined for (p, m, v).
bool simulate(const PlanRequest& req, const Config& c, Plan& plan) {
  const auto options = schedule::GeneratorOptions{}
                           .set_ranks(c.p)
                           .set_microbatches(c.microbatches)
                           .set_virtual_stages(c.schedule == "interleaved" ? c.virtual_stages : 0);
  schedule::Schedule generated;
  std::unique_ptr<sim::ActionSource> source;
  try {
    if (sim::has_closed_form(c.schedule)) {
      source = sim::closed_form_source(c.schedule, options);
    } else {
      generated = schedule::generate(c.schedule, options);
      source = sim::schedule_source(generated);
    }
  } catch (const Error&) {
    return false;
  }
  const sim::CostModel costs = costs_of(req, c);
  const sim::Stats stats = sim::simulate_stats(*source, costs);
  double memory = 0;
  for (int r = 0; r < c.p; ++r)
    memory = std::max(memory, stats.parameter_bytes[r] + stats.peak_activation_bytes[r]);
  plan.config = c;
  plan.memory_bytes = memory + (req.profile ? 0 : working_bytes(req.shape, c));
  plan.bubble_fraction = stats.bubble_fraction;
  // With a profile, each step also pays the slowest rank's optimizer step
  // and, with ZeRO-1, the parameter gather (baton's: an all-reduce of the
  // parameters with zeros where a replica is not the owner).
  double optimizer_s = 0;
  if (req.profile) {
    optimizer_s = profiled_optimizer_seconds(*req.profile, c);
    if (c.zero1 && c.d > 1) {
      optimizer_s +=
          gradient_allreduce_seconds(profiled_gradient_bytes(*req.profile, c), req.cluster, c);
    }
  }
  plan.step_s = stats.steady_step + exposed_dp_of(req, c, costs) + optimizer_s;
  plan.simulated = true;
  return true;
}

void finish(const PlanRequest& req, Plan& plan) {
  plan.tflops_per_gpu = req.profile ? 0
                                    : step_flops(req.shape, req.batch, plan.config.recompute) /
                                          plan.step_s / req.cluster.gpus / 1e12;
  plan.sequences_per_s = req.batch / plan.step_s;
}

bool faster(const Plan& a, const Plan& b) {
  return std::tie(a.step_s, a.memory_bytes) < std::tie(b.step_s, b.memory_bytes);
}

}  // namespace

PlanResult plan(const PlanRequest& req) {
  const int layers = req.profile ? static_cast<int>(req.profile->layers.size()) : req.shape.layers;
  if (!req.profile) check_shape(req.shape);
  const Cluster& cl = req.cluster;
  BATON_CHECK(cl.gpus >= 1 && cl.gpus_per_node >= 1 && req.batch >= 1,
              "[plan] --gpus, --gpus-per-node and --batch must be at least 1 (gpus=", cl.gpus,
              ", gpus-per-node=", cl.gpus_per_node, ", batch=", req.batch, ")");
  const double limit = cl.memory_gb * 1e9;
  PlanResult result;
  std::string refused;  // why the first (t, p, d) failed, for the error
  int refused_count = 0;
  int allowed = 0;
  Plan smallest;  // the least memory any candidate needs
  smallest.memory_bytes = INFINITY;
  std::map<std::tuple<int, int, std::string, bool, bool>, Plan> best;  // family -> fastest b

  for (int t : divisors(cl.gpus)) {
    for (int p : divisors(cl.gpus / t)) {
      const int d = cl.gpus / t / p;
      std::string why;
      if (req.profile && t != 1) {
        why = "t=" + std::to_string(t) + " is not 1 (a profile is one device's)";
        ++result.rejected["profile_needs_t_1"];
      } else if (!req.profile && req.shape.heads % t != 0) {
        why =
            "t=" + std::to_string(t) + " does not divide heads=" + std::to_string(req.shape.heads);
        ++result.rejected["t_does_not_divide_heads"];
      } else if (cl.gpus_per_node % t != 0 && t % cl.gpus_per_node != 0) {
        why = "t=" + std::to_string(t) + " neither divides nor is a multiple of gpus-per-node=" +
              std::to_string(cl.gpus_per_node);
        ++result.rejected["t_does_not_tile_nodes"];
      } else if (req.profile && p > layers) {
        why = "p=" + std::to_string(p) + " exceeds the profiled layers=" + std::to_string(layers);
        ++result.rejected["p_exceeds_profiled_layers"];
      } else if (!req.profile && layers % p != 0) {
        why = "p=" + std::to_string(p) + " does not divide layers=" + std::to_string(layers);
        ++result.rejected["p_does_not_divide_layers"];
      } else if (req.batch % d != 0) {
        why = "d=" + std::to_string(d) + " does not divide batch=" + std::to_string(req.batch);
        ++result.rejected["d_does_not_divide_batch"];
      }
      if (!why.empty()) {
        if (++refused_count <= kRefusalsNamed) {
          refused +=
              (refused.empty() ? "" : "; ") + ("(" + std::to_string(t) + "," + std::to_string(p) +
                                               "," + std::to_string(d) + "): " + why);
        }
        continue;
      }
      ++allowed;
      for (const std::string& name : req.schedules) {
        if (p == 1 && name != "1f1b") continue;
        const int v = name == "interleaved" || name == "zb-v" ? 2 : 1;
        for (int b : divisors(req.batch / d)) {
          if (req.microbatch > 0 && b != req.microbatch) continue;
          const int m = req.batch / d / b;
          for (int recompute = 0; recompute < (req.profile ? 1 : 2); ++recompute) {
            for (int zero = 0; zero < (d > 1 ? 2 : 1); ++zero) {
              ++result.candidates;
              if (req.profile ? static_cast<long>(p) * v > layers
                              : layers % (static_cast<long>(p) * v) != 0) {
                ++result.rejected["layers_not_divisible_by_stages"];
                continue;
              }
              if (static_cast<long>(p) * v * m > kMaxSimulatedCells) {
                ++result.rejected["too_large_to_simulate"];
                continue;
              }
              if (name == "interleaved" && m % std::max(1, m / p) != 0) {
                ++result.rejected["schedule_undefined_for_m"];
                continue;
              }
              Plan e;
              e.config = Config{t, p, d, b, m, name, v, recompute == 1, zero == 1};
              const Estimate est = estimate_of(req, e.config);
              e.step_s = est.step_s;
              e.memory_bytes = est.memory_bytes;
              finish(req, e);
              result.estimates.push_back(e);
              if (e.memory_bytes < smallest.memory_bytes) smallest = e;
              if (e.memory_bytes > limit) {
                ++result.rejected["out_of_memory"];
                continue;
              }
              auto key = std::make_tuple(t, p, name, recompute == 1, zero == 1);
              auto it = best.find(key);
              if (it == best.end()) {
                best.emplace(key, e);
              } else {
                ++result.rejected["slower_microbatch_size"];
                if (faster(e, it->second)) it->second = e;
              }
            }
          }
        }
      }
    }
  }
  if (refused_count > kRefusalsNamed)
    refused += "; and " + std::to_string(refused_count - kRefusalsNamed) + " more";
  BATON_CHECK(allowed > 0, "[plan] no (t, p, d) with t*p*d = ", cl.gpus,
              " GPUs is allowed (t must divide heads and tile nodes, p divide layers, "
              "d batch): ",
              refused);
  BATON_CHECK(req.microbatch == 0 || result.candidates > 0, "[plan] --microbatch ", req.microbatch,
              " divides batch / d for no allowed d (batch=", req.batch, ")");
  BATON_CHECK(!best.empty(), "[plan] no configuration fits in ", cl.memory_gb,
              " GB per GPU; the smallest needs ", std::ceil(smallest.memory_bytes / 1e8) / 10,
              " GB per GPU (", describe(smallest.config), ")");

  std::vector<Plan> survivors;
  for (auto& [key, plan] : best) survivors.push_back(plan);
  std::sort(survivors.begin(), survivors.end(), faster);
  if (static_cast<int>(survivors.size()) > req.simulate_limit) {
    result.rejected["beyond_simulate_limit"] += survivors.size() - req.simulate_limit;
    survivors.resize(req.simulate_limit);
  }
  Plan smallest_simulated;
  smallest_simulated.memory_bytes = INFINITY;
  for (const Plan& estimate : survivors) {
    Plan plan;
    if (!simulate(req, estimate.config, plan)) {
      ++result.rejected["schedule_undefined_for_m"];
      continue;
    }
    finish(req, plan);
    if (plan.memory_bytes < smallest_simulated.memory_bytes) smallest_simulated = plan;
    if (plan.memory_bytes > limit) {
      ++result.rejected["out_of_memory"];
      continue;
    }
    result.plans.push_back(plan);
  }
  BATON_CHECK(!result.plans.empty(), "[plan] no simulated configuration fits in ", cl.memory_gb,
              " GB per GPU; the smallest needs ",
              std::ceil(smallest_simulated.memory_bytes / 1e8) / 10, " GB per GPU (",
              describe(smallest_simulated.config), ")");
  std::sort(result.plans.begin(), result.plans.end(), faster);
  return result;
}

}  // namespace baton::plan
