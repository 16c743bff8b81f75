// What one configuration (t, p, d, b, schedule, recomputation, ZeRO) costs on
// a cluster: per-stage times and bytes for the simulator, the data-parallel
// gradient all-reduce, and the planner's analytic estimates of step time and
// memory that prune the search before anything is simulated.
#pragma once

#include <string>
#include <vector>

#include "baton/plan/model.h"
#include "baton/sim/cost_model.h"

namespace baton::plan {

// A cluster of identical GPUs. Bandwidths are per GPU and direction, in
// gigabits per second; the defaults are NVLink-class inside a node (A100
// NVLink 3: 300 GB/s = 2400 Gb/s, 5 us) and InfiniBand-class between nodes
// (one HDR 200 Gb/s adapter per GPU, 10 us).
struct Cluster {
  int gpus = 1;
  int gpus_per_node = 8;
  double memory_gb = 80;     // per GPU, 1 GB = 1e9 bytes
  double peak_tflops = 312;  // per GPU, dense fp16/bf16
  double intra_node_gbps = 2400;
  double inter_node_gbps = 200;
  double intra_node_latency_us = 5;
  double inter_node_latency_us = 10;
  // Achieved fraction of peak: efficiency * x / (x + efficiency_half_size),
  // where x = b s h / t is the size (rows x columns) of a layer's per-GPU
  // output GEMM: large GEMMs reach `efficiency`, small ones (small b, large t)
  // fall off. At x = half_size, half of it.
  double efficiency = 0.6;
  double efficiency_half_size = 5e5;
};

struct Config {
  int t = 1, p = 1, d = 1;
  int microbatch = 1;    // b, sequences
  int microbatches = 1;  // m = B / (d b)
  std::string schedule = "1f1b";
  int virtual_stages = 1;  // v: stage chunks per rank (2 for interleaved v=2 and zb-v)
  bool recompute = false;
  bool zero1 = false;
};

double gemm_efficiency(const Cluster& cluster, const ModelShape& shape, int microbatch, int t);

// Ring all-reduce of `bytes` over n ranks: 2 (n - 1) / n * bytes / bandwidth
// + latency; 0 for n = 1.
double allreduce_seconds(double bytes, int n, double gbps, double latency_us);

// Tensor-parallel groups use the intra-node link when t <= G; ranks are laid
// out t innermost, then d, then p (Megatron's order), so a data-parallel group
// stays in a node when t d <= G and consecutive stages share a node only when
// the whole grid does (t d p <= G).
bool tensor_parallel_in_node(const Cluster& cluster, const Config& config);
bool data_parallel_in_node(const Cluster& cluster, const Config& config);
bool pipeline_in_node(const Cluster& cluster, const Config& config);

// Per-stage costs of one data-parallel replica's pipeline, in seconds and
// bytes, p v stages of l / (p v) layers: F, I, W of the layers (I adds the
// recomputed forward), two tensor-parallel all-reduces per layer in F and two
// in I (two more when recomputing), the logits on the last stage, the
// embedding's parameters on the first and a copy on the last; boundary
// activations of b s h in 2 bytes over the pipeline's link.
// REQUIRES: layers % (p v) == 0.
sim::CostModel stage_costs(const ModelShape& shape, const Cluster& cluster, const Config& config);

// The data-parallel gradient all-reduce (fp16 gradients of the busiest rank's
// parameters) and the part of it the last backward does not hide: buckets go
// out as the rank's last micro-batch's backward produces them.
double dp_allreduce_seconds(const ModelShape& shape, const Cluster& cluster, const Config& config);
// The all-reduce of `bytes` of gradients over the configuration's dp group,
// and the part of an all-reduce longer than rank 0's last backward.
double gradient_allreduce_seconds(double bytes, const Cluster& cluster, const Config& config);
double exposed_seconds(double allreduce_s, const Config& config, const sim::CostModel& costs);
double dp_exposed_seconds(const ModelShape& shape, const Cluster& cluster, const Config& config,
                          const sim::CostModel& costs);

// Working memory beyond what the simulator counts: with recomputation, one
// layer's full activations while it is recomputed.
double working_bytes(const ModelShape& shape, const Config& config);

// Micro-batches' worth of stage chunks rank 0 holds at its peak, as the
// papers give them (tests/sim checks the simulator against the same).
int analytic_peak_chunks(const Config& config);

// Stage chunks of rank r: the loop map (s % p == r) or zb-v's V (r, 2p-1-r).
std::vector<int> stages_of_rank(const Config& config, int rank);

struct Estimate {
  double step_s = 0;
  double memory_bytes = 0;  // per GPU, on the busiest rank
};
// Bubble formulas of the schedules (1f1b (m + p - 1)(F + I + W); interleaved
// with (p - 1) / v; zb-h1 m (F + I + W) + (p - 1)(F + I - W); zb-v about
// m (F + I + W) + (p - 1) max(0, F + I - 2W)) on the slowest rank's
// per-micro-batch times, plus transfers and the exposed dp all-reduce; memory
// from analytic_peak_chunks().
Estimate estimate(const ModelShape& shape, const Cluster& cluster, const Config& config);
// The same on given stage costs, exposed dp time and working bytes (a profile's).
Estimate estimate(const sim::CostModel& costs, const Config& config, double dp_exposed_s,
                  double working_bytes);

}  // namespace baton::plan
