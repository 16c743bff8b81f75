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
  // Memory bandwidth per GPU, GB/s (A100 80 GB: 2039): a layer's F and I
  // also move its activation bytes (layer_activation_bytes() without
  // recomputation) through memory for the element-wise work (LayerNorm,
  // GeLU, dropout, softmax, residuals), which does not run at GEMM speed.
  double memory_gb_per_s = 2039;
  // The dp gradient all-reduce overlaps the compute after each stage's last
  // backward (baton's REDUCE_GRAD placement); off: it follows the backward.
  bool overlap_grad_reduce = true;
  // Optimizer state per parameter beyond the fp16 weights and gradients
  // (model.h state_bytes_per_parameter()): 12 for Adam's fp32 master
  // weights, momentum and variance; 16 for Megatron-LM's fp16 optimizer.
  double optimizer_bytes_per_parameter = 12;
  // The data-parallel all-reduce's own measured rate, when given (above 0):
  // its bus bandwidth in Gbit/s (what moves 2 (d - 1) / d of the bytes) and
  // its whole latency in microseconds, in place of the link's. A collective
  // need not run at the point-to-point link's rate (`baton plan
  // --allreduce-gbps`; `baton train --dp 2 --compare-sim` prints the probe).
  double allreduce_gbps = 0;
  double allreduce_latency_us = 0;
};

struct Config {
  int t = 1, p = 1, d = 1;
  int microbatch = 1;    // b, sequences
  int microbatches = 1;  // m = B / (d b)
  std::string schedule = "1f1b";
  int virtual_stages = 1;  // v: stage chunks per rank (2 for the V schedules)
  bool recompute = false;  // full recomputation (Korthikanti's "full")
  int zero = 0;            // ZeRO stage 0-3 over the d replicas
  // Transformer blocks of each of the p v stages; empty: l / (p v) each.
  std::vector<int> stage_layers;
  // Selective recomputation (Korthikanti's; baton's --recompute selective):
  // attention's s^2 core and the MLP's GELU recomputed in the backward;
  // never with `recompute`.
  bool selective = false;
};

// The blocks of each stage: config.stage_layers, or the uniform cut.
// REQUIRES: stage_layers empty and layers % (p v) == 0, or p v counts.
std::vector<int> stage_layers_of(int layers, const Config& config);

// Megatron-style uneven stages: the cut of `layers` equal blocks into
// `stages` stages whose slowest stage is fastest, where the last stage also
// runs the logits, `last_extra` blocks' worth of time. Of the cuts that
// reach it, the one that gives the spare capacity back from the ends inwards
// (first stage, last stage, second, second to last, ...), so the first and
// last stages hold fewer blocks (Megatron's --decoder-first/last-pipeline-
// num-layers). Equals the uniform cut when that is as fast.
// REQUIRES: 1 <= stages <= layers, last_extra >= 0.
std::vector<int> balanced_stage_layers(int layers, int stages, double last_extra);

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
// bytes, p v stages of stage_layers_of() blocks: F, I, W of the blocks (GEMMs
// at the achieved rate; F and I add the element-wise memory traffic, I adds
// the recomputed forward), two tensor-parallel all-reduces per block in F and
// two in I (two more when recomputing), the logits on the last stage, the
// embedding's parameters on the first and the LM head's on the last (none
// when tied and on the first stage's rank); boundary activations of b s h in
// 2 bytes over the pipeline's link.
sim::CostModel stage_costs(const ModelShape& shape, const Cluster& cluster, const Config& config);

// The data-parallel gradient all-reduce (fp16 gradients of the busiest rank's
// parameters) and the part of it no compute hides, as baton places it: each
// stage's buckets go out after the stage's last backward on its rank, so rank
// 0's lowest stage (which ends the backward pass) hides nothing, and its
// other chunks hide behind the lowest stage's last min(m, p) backwards (all
// of it without cluster.overlap_grad_reduce).
double dp_allreduce_seconds(const ModelShape& shape, const Cluster& cluster, const Config& config);
// The all-reduce of `bytes` of gradients over the configuration's dp group,
// and the part of an all-reduce that rank 0's compute after it does not hide.
double gradient_allreduce_seconds(double bytes, const Cluster& cluster, const Config& config);
double exposed_seconds(double allreduce_s, const Config& config, const sim::CostModel& costs);
// The same, all of it unless `overlap`.
double exposed_seconds(double allreduce_s, const Config& config, const sim::CostModel& costs,
                       bool overlap);
double dp_exposed_seconds(const ModelShape& shape, const Cluster& cluster, const Config& config,
                          const sim::CostModel& costs);

// Working memory beyond what the simulator counts: with recomputation, one
// layer's full activations while it is recomputed; with selective
// recomputation, one layer's attention core and GELU output (5 a s^2 b / t +
// 8 s b h / t).
double working_bytes(const ModelShape& shape, const Config& config);

// The tied embedding's exchange once per step: its fp16 gradient (V h / t x 2
// bytes) summed between the first and the last stage's ranks over the
// pipeline link, after the backward; 0 when untied or both stages share a rank.
double tied_exchange_seconds(const ModelShape& shape, const Cluster& cluster, const Config& config);

// Micro-batches' worth of stage chunks rank 0 holds at its peak (the
// schedule row's peak_chunks, schedules.h), at least:
// the papers' peak counts, never above what the simulator counts
// (tests/plan/costs_test.cpp checks every searched schedule against it).
int analytic_peak_chunks(const Config& config);

// Stage chunks of rank r on the schedule's map: loop (s % p == r) or V
// (r and 2p - 1 - r).
std::vector<int> stages_of_rank(const Config& config, int rank);

// Lower bounds of what the simulator will find, so that pruning on them
// never drops the true best (search.h).
struct Estimate {
  double step_s = 0;        // at most the simulated step time + the same additions
  double memory_bytes = 0;  // at most the simulated peak on the busiest rank
};
// Step: the steady step is at least each rank's busy time m (F + I + W), and
// at least head + tail + m (F + I) of each rank r (I with W for a full
// backward): a step's first forward on r starts after rank 0 ends its
// previous step and the forwards of the stages below r, and rank 0 ends only
// after the input backwards of those stages follow r's last one. Plus the
// exposed dp all-reduce and the tied exchange. Memory: the parameters and
// analytic_peak_chunks() of rank 0's smallest chunk, or any rank's parameters
// and one micro-batch of its largest chunk.
Estimate estimate(const ModelShape& shape, const Cluster& cluster, const Config& config);
// The same on given stage costs, time added after the pipeline (exposed dp
// all-reduce, tied exchange) and working bytes (a profile's).
Estimate estimate(const sim::CostModel& costs, const Config& config, double added_s,
                  double working_bytes);

}  // namespace baton::plan
