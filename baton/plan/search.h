// The planner's search: every (t, p, d) with t p d = N, t dividing the heads
// and dividing (or a multiple of) the GPUs per node, p at most the layers, d
// dividing the global batch B; every micro-batch size b dividing B / d; the
// schedules of schedules.h (interleaved with every v >= 2 that leaves a layer
// per chunk); the uniform cut of the layers (when p v divides them) and the
// balanced, Megatron-style uneven one (costs.h); recomputation on and off;
// ZeRO-1 on and off when d > 1. Constraints narrow each of these.
//
// Each candidate gets lower bounds of its step time and memory (costs.h
// estimate()); those whose memory bound does not fit are rejected, and the
// rest are simulated in order of their step bound (one data-parallel
// replica's pipeline, stream_stats.h) until the next bound exceeds the
// `top`-th best simulated step. So no candidate left unsimulated could rank
// among the first `top` plans: pruning never drops the true best.
// Pipelines of more than 2^20 (stage, micro-batch) pairs are not searched.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "baton/core/choices.h"
#include "baton/plan/costs.h"
#include "baton/plan/profile.h"

namespace baton::plan {

// Recomputation: the runtime's modes (core/choices.h); the planner searches
// Never, Selective (attention's core) and Always, not ExceptLast.
using ::baton::Recompute;

struct PlanRequest {
  ModelShape shape;
  Cluster cluster;
  int batch = 1;  // B, global batch in sequences
  // Schedules searched (schedules.h names; default all). At p = 1 every
  // schedule is 1f1b, which alone is kept.
  std::vector<std::string> schedules;
  // The recomputation modes and ZeRO stages searched (default all; ZeRO 1-3
  // need d > 1, candidates with d = 1 are refused for them).
  std::vector<Recompute> recompute{Recompute::Never, Recompute::Selective, Recompute::Always};
  std::vector<int> zero{0, 1, 2, 3};
  // When > 0, only this tensor / pipeline / data parallel size, or micro-batch size.
  int tp = 0, pp = 0, dp = 0, microbatch = 0;
  double max_memory_fraction = 1;  // of cluster.memory_gb a plan may use, in (0, 1]
  int top = 10;                    // plans ranked exactly (see above)
  long simulate_limit = 1 << 20;   // simulations at most; past it the ranking is not exact
  // Measured layer costs in place of the formulas (profile.h): `shape` is
  // then unused, only t = 1 and no recomputation are searched, p v may be any
  // count up to the profiled layers (cut as partition::uniform cuts them),
  // and the FLOPs figures are 0 (no FLOPs are known).
  std::optional<Profile> profile;
};

struct Plan {
  Config config;
  double memory_bytes = 0;     // per GPU, the busiest rank
  double bubble_fraction = 0;  // of the simulated step
  double step_s = 0;           // simulated steady step + exposed dp all-reduce + tied exchange
  // Model FLOPs (3 passes: step_flops(recompute = false)) and hardware FLOPs
  // (the recomputed forward counted: step_flops(config.recompute)) per second
  // and GPU, in TFLOP/s, and as fractions of the peak (MFU, HFU).
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0, hfu = 0;
  double sequences_per_s = 0;  // B / step_s
  bool simulated = false;      // false: lower bounds only (estimate())
};

struct PlanResult {
  std::vector<Plan> plans;               // simulated and fitting, best first
  std::vector<Plan> estimates;           // every candidate past the structural rules (bounds)
  std::map<std::string, long> rejected;  // reason -> count (docs/planner.md)
  long candidates = 0;                   // candidates estimated
  long simulated = 0;                    // simulations run
};

// Throws baton::Error (one line) when the constraints leave no plan, naming
// the rule that removed the last candidates: no (t, p, d) allowed (each rule
// that failed), nothing that fits in memory (the smallest memory per GPU
// that would fit and its configuration), or another rule and an example.
PlanResult plan(const PlanRequest& request);

// "t=8 p=4 d=2 b=1 m=16 interleaved v=3 recompute zero1 layers=3,4,4,3"
// ("selective" for selective recomputation, "zero2", "zero3")
std::string describe(const Config& config);

}  // namespace baton::plan
