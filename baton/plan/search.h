// The planner's search: every (t, p, d) with t p d = N, t dividing the heads
// and dividing (or a multiple of) the GPUs per node, p dividing the layers, d dividing the global
// batch B; every micro-batch size b dividing B / d; the schedules below; recomputation on and off;
// ZeRO-1 on and off when d > 1. Each candidate is first estimated analytically (costs.h); those
// that do not fit in memory are rejected, only the fastest b of each (t, p, d, schedule, recompute,
// zero) family is kept, and the `simulate_limit` fastest of those are simulated (one data-parallel
// replica's pipeline, stream_stats.h) and ranked by simulated throughput.
// Pipelines of more than 2^20 (stage, micro-batch) pairs are not searched.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "baton/plan/costs.h"
#include "baton/plan/profile.h"

namespace baton::plan {

struct PlanRequest {
  ModelShape shape;
  Cluster cluster;
  int batch = 1;  // B, global batch in sequences
  // Schedules searched: interleaved (v = 2) and zb-v need layers % 2p == 0;
  // at p = 1 every schedule is 1f1b, which alone is kept.
  std::vector<std::string> schedules = {"1f1b", "interleaved", "zb-h1", "zb-v"};
  int simulate_limit = 64;
  int microbatch = 0;  // b: when > 0, only this micro-batch size is searched
  // Measured layer costs in place of the formulas (profile.h): `shape` is
  // then unused, only t = 1 and no recomputation are searched, p v may be any
  // count up to the profiled layers (cut as partition::uniform cuts them),
  // and tflops_per_gpu is 0 (no FLOPs are known).
  std::optional<Profile> profile;
};

struct Plan {
  Config config;
  double memory_bytes = 0;     // per GPU, the busiest rank
  double bubble_fraction = 0;  // of the simulated step
  double step_s = 0;           // simulated steady step + exposed dp all-reduce
  double tflops_per_gpu = 0;   // step_flops() / step_s / N (recomputation counted)
  double sequences_per_s = 0;  // B / step_s
  bool simulated = false;      // false: analytic estimate only
};

struct PlanResult {
  std::vector<Plan> plans;               // simulated and fitting, best first
  std::vector<Plan> estimates;           // every candidate past the structural rules (analytic)
  std::map<std::string, long> rejected;  // reason -> count (see the README for the units)
  long candidates = 0;                   // (t, p, d, b, schedule, recompute, zero) estimated
};

// Throws baton::Error (one line) when no (t, p, d) is allowed, naming each
// rule that failed, or when nothing fits in memory, naming the smallest memory
// per GPU that would fit and its configuration.
PlanResult plan(const PlanRequest& request);

}  // namespace baton::plan
