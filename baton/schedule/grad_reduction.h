// Data-parallel gradient reduction in the schedule: the lowering pass that
// places REDUCE_GRAD actions, and DDP's packing of parameters into buckets.
//
// Each (rank, stage it computes) reduces its gradients over the stage's dp
// group in buckets. All of a stage's buckets are ready once its last backward
// of the step has run (every micro-batch's backward adds to every parameter's
// gradient), so bucket k's REDUCE_GRAD goes right after that backward (B, or
// W when the backward is split; after the SEND_B that follows it, if any), in
// bucket order: the all-reduces then run on the rank's communication stream
// while the rank computes the rest of its backward work.
#pragma once

#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::schedule {

// DDP's default bucket size, bucket_cap_mb = 25 (MiB).
inline constexpr double kDefaultBucketMiB = 25;

// Packs parameters into gradient buckets as torch DDP does: in reverse layer
// order (the order backward produces their gradients), a bucket closes when
// the next parameter would take it past `bucket_bytes`; a parameter larger
// than a bucket gets a bucket of its own. `parameter_bytes` is in layer order
// (first layer first). Returns the buckets' sizes in reduction order (bucket 0
// holds the last parameters). No parameters, no buckets.
// REQUIRES (throws otherwise): bucket_bytes > 0; sizes finite and >= 0.
std::vector<double> gradient_buckets(const std::vector<double>& parameter_bytes,
                                     double bucket_bytes);

// The members of those buckets: for each bucket in reduction order, the
// indices into `parameter_bytes` it holds, in the order they were packed
// (descending). gradient_buckets() is their byte sums.
std::vector<std::vector<int>> gradient_bucket_members(const std::vector<double>& parameter_bytes,
                                                      double bucket_bytes);

// The same for parameters too small to list (the simulator's uniform costs):
// `total_bytes` cut into buckets of `bucket_bytes`, the last one smaller;
// always at least one bucket (of 0 bytes when there are none).
std::vector<double> even_gradient_buckets(double total_bytes, double bucket_bytes);

// Returns `schedule` with buckets_per_stage[s] REDUCE_GRAD actions (buckets
// 0..n-1) for every stage s on every rank that computes it, placed as the
// header says. With dp == 1 there is nothing to reduce: the schedule comes
// back unchanged. Works on compute-only and lowered schedules; the result is
// validated.
// REQUIRES (throws otherwise): dp >= 1; `schedule` valid and without
// REDUCE_GRAD, and with a flush when dp > 1 (not Schedule::carries); one count per stage, each
// in 1..kMaxMicrobatches - 1, and the result within kMaxActions.
Schedule add_grad_reductions(const Schedule& schedule, int dp,
                             const std::vector<int>& buckets_per_stage);

// `schedule` with every REDUCE_GRAD moved to the end of its rank's list, in
// the same order: no reduction overlaps any compute of the step (what
// Megatron-LM runs without --overlap-grad-reduce). The result is validated.
Schedule defer_grad_reductions(const Schedule& schedule);

}  // namespace baton::schedule
