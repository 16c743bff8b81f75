// What the simulator charges for each action: per-stage compute times,
// activation and parameter bytes, the link between pipeline ranks, and the
// collectives of data and tensor parallelism.
//
// Collectives are ring all-reduces: over a group of d ranks, n bytes take
//   2 (d - 1) / d * n / bandwidth + 2 (d - 1) * latency
// (reduce-scatter then all-gather, 2 (d - 1) steps), and nothing when d = 1.
//  - REDUCE_GRAD (data parallelism) all-reduces one gradient bucket of its
//    stage over the dp group, on the rank's communication stream.
//  - Tensor parallelism adds StageCost::tp_comm to every F and every B or I
//    (W needs no tp all-reduce): the time of the all-reduces of activations
//    inside the stage, on the critical path (Megatron-LM: 2 in the forward
//    and 2 in the backward of each transformer layer; see tp_comm_time()).
//  - With tp > 1 and scatter_gather (Megatron's scatter/gather, baton's
//    default), a boundary moves as 1/tp of its bytes over the pipeline link,
//    then a gather over the tp group: baton gathers with an all-reduce of the
//    slices padded with zeros, so it costs ring_allreduce_time(tp, bytes).
//    Without it, the whole boundary crosses the pipeline link.
#pragma once

#include <algorithm>
#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::sim {

struct StageCost {
  double forward = 1;             // F time for one micro-batch
  double input_backward = 1;      // I time; a full B costs input_backward + weight_backward
  double weight_backward = 1;     // W time
  double activation_bytes = 1;    // held from F until its B or I
  double weight_stash_bytes = 0;  // of those, held on from I until W (inputs W needs)
  double boundary_bytes = 0;  // output activation sent to the next stage (and its gradient back)
  double parameter_bytes = 0;
  // Gradient buckets in reduction order (bucket 0 first: the last layers'),
  // in bytes; empty means one bucket of parameter_bytes.
  std::vector<double> bucket_bytes;
  // Time an F, and a B or I, spends in tensor-parallel all-reduces.
  double tp_comm = 0;
  // Bytes of the stage's tied gradient copies (a tied weight's, or the whole
  // stage's when it is replicated) that its REDUCE_TIED exchanges.
  double tied_bytes = 0;
  // CLIP_NORM's local work on the stage: the squared norm of its gradients
  // and their scaling (a pass over parameter_bytes, read twice).
  double clip = 0;

  int bucket_count() const {
    return bucket_bytes.empty() ? 1 : static_cast<int>(bucket_bytes.size());
  }
  double bucket(int k) const { return bucket_bytes.empty() ? parameter_bytes : bucket_bytes[k]; }
};

// A link: per-message latency and bandwidth (0 means infinite).
struct Link {
  double latency = 0;
  double bytes_per_time = 0;
};

// The ring all-reduce time above; 0 for a group of one.
// REQUIRES: group_size >= 1, bytes >= 0.
double ring_allreduce_time(int group_size, double bytes, const Link& link);
// A ring all-gather of `bytes` in all (each member brings 1/n): n - 1 steps
// of bytes / n each; 0 for a group of one. Half a ring all-reduce's time.
double ring_allgather_time(int group_size, double bytes, const Link& link);

// Megatron-LM's tensor-parallel cost of `layers` transformer layers for one
// F (or one B/I): 2 all-reduces per layer of `activation_bytes` (b * s * h *
// element size) over the tp group.
double tp_comm_time(int tp, double layers, double activation_bytes, const Link& link);

struct CostModel {
  std::vector<StageCost> stages;   // one per stage of the schedule
  double comm_latency = 0;         // time from a producing action's end to its output's arrival
  double comm_bytes_per_time = 0;  // link bandwidth; 0 means infinite
  int dp = 1;                      // the data-parallel group REDUCE_GRAD reduces over
  Link dp_link;
  int tp = 1;  // tensor-parallel ranks per stage
  Link tp_link;
  bool scatter_gather = false;  // see the header comment; only with tp > 1 and boundary bytes
  // Bytes of each skip connection's tensor (Schedule::skips order); a skip
  // beyond the vector, or below 0, moves its stashing stage's boundary bytes.
  std::vector<double> skip_bytes;

  // Time to move the boundary between stage `stage` and `stage + 1` (with
  // scatter/gather: its slice over the pipeline link, then the tp gather).
  double comm_time(int stage) const;
  // Time to move skip `skip` (stashed on stage `from`) straight to its
  // popping stage, over the pipeline link, as one message.
  double skip_time(int skip, int from) const;
  double backward(int stage) const {
    return stages[stage].input_backward + stages[stage].weight_backward;
  }
  // REDUCE_GRAD of bucket `bucket` of `stage`, and REDUCE_SCATTER's, which the
  // runtime runs as an all-reduce whose shard it keeps (runtime/zero.h).
  // REQUIRES: bucket < bucket_count().
  double reduce_grad_time(int stage, int bucket) const {
    return ring_allreduce_time(dp, stages[stage].bucket(bucket), dp_link);
  }
  // UNSHARD of `stage` (ZeRO): the all-gather of its parameters over the dp
  // group. RESHARD frees memory and takes no time.
  double unshard_time(int stage) const {
    return ring_allgather_time(dp, stages[stage].parameter_bytes, dp_link);
  }
  // REDUCE_TIED of `stage` between ranks: one message of its tied bytes over
  // the pipeline link (each rank of a group sends its partial sum to the
  // others at once).
  double reduce_tied_time(int stage) const {
    const double bytes = stages[stage].tied_bytes;
    return comm_latency + (comm_bytes_per_time > 0 ? bytes / comm_bytes_per_time : 0);
  }
  // CLIP_NORM's all-reduce of one number over the world of `pipeline_ranks`
  // x dp x tp ranks: a ring's 2 (n - 1) messages, each at the larger latency
  // of the pipeline's and the dp group's links.
  double clip_norm_time(int pipeline_ranks) const {
    return ring_allreduce_time(pipeline_ranks * dp * tp, 8,
                               Link{std::max(comm_latency, dp_link.latency), 0});
  }
};

// Costs per rank, as the CLI takes them: tf, tb (full backward) and tw (its
// weight part) are the work of a rank's whole share of the model for one
// micro-batch; a rank holding v chunks pays 1/v of it per chunk action. So
// I = (tb - tw) / v, W = tw / v. `comm` is the latency between ranks.
// REQUIRES: finite costs with 0 <= tw <= tb, tf >= 0, comm >= 0 (throws
// otherwise).
CostModel uniform_cost_model(const schedule::Schedule& schedule, double tf, double tb, double tw,
                             double comm = 0);

}  // namespace baton::sim
