// What a user's program sees of the executor: the loss function it gives
// and what each step returns (Pipeline::step, flush, last_step). Kept apart
// from executor.h so that the public headers (baton.h, pipeline.h) do not
// reach the executor.
#pragma once

#include <torch/types.h>

#include <functional>
#include <limits>
#include <map>
#include <vector>

#include "baton/trace/timeline.h"

namespace baton::runtime {

// The model's mean loss over a (micro-)batch.
using LossFn =
    std::function<torch::Tensor(const torch::Tensor& output, const torch::Tensor& target)>;

struct StepResult {
  double loss = 0;  // sum of this rank's scaled micro-batch losses (0 without a last stage)
  // The mini-batch's mean loss (every last-stage rank's `loss`, summed in
  // rank order), the same on every rank; NaN without share_loss on a rank
  // that holds no last stage.
  double minibatch_loss = 0;
  double step_ms = 0;
  // The most stage-input bytes this rank kept at once for backwards: a cheap
  // count, far below what autograd keeps (comm/memory_counter.h measures that).
  double peak_activation_bytes = 0;
  // Weight versions this rank held at most during the step, measured as
  // distinct parameter storages at its start and end: 1; with 2bw 2 while
  // backwards are carried; with pipedream one per micro-batch in flight
  // (p - r on rank r); with pipemare 2 on a rank whose stage corrects (a
  // delay above 0), the masters and the copy it computes on.
  int weight_versions = 1;
  // dp > 1: how long the step waited at its end for its REDUCE_GRADs to
  // finish, ms.
  double reduction_wait_ms = 0;
  // dp > 1: the time this rank's REDUCE_GRADs were in flight, ms (the union
  // of their events, from each start to its all-reduce's finish), and how
  // much of it was exposed: the end of the last one past the end of the
  // rank's last compute action (0 when none ends later), as the simulator's
  // Stats::exposed_reduction counts it. The rest was hidden behind compute.
  double reduction_ms = 0;
  double exposed_reduction_ms = 0;
  // ZeRO with dp > 1: how long the step's computes waited for their stages'
  // UNSHARD all-gathers, ms (the gather time the prefetch did not hide).
  double unshard_wait_ms = 0;
  // The global L2 norm of the step's gradients before the clip, the same on
  // every rank: NaN unless the schedule has a CLIP_NORM (or infinite, or NaN,
  // when a gradient was: the caller then skips the update).
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  // The CLIP_NORM found a norm that is not finite (an fp16 overflow, a NaN):
  // the gradients were left as they are; do not step the optimizer.
  bool skip_update = false;
  // fp16: the loss scale this step's backward used (1 otherwise).
  double loss_scale = 1;
  // This rank's compute actions, REDUCE_TIED and CLIP_NORM, and its
  // REDUCE_GRADs (from the action's start to its all-reduce's finish), ms
  // from the step's start.
  std::vector<trace::Event> events;
  // When the step started on this rank: ms on the steady clock, which ranks
  // of one host share (to put every rank's events on one time axis).
  double start_ms = 0;
  // Bytes of the activation each stage of this rank sent forward (the last
  // micro-batch's): what the simulator charges to move a boundary.
  std::map<int, double> stage_boundary_bytes;
  // Bytes of each skip connection's tensor this rank sent forward (by index
  // in Schedule::skips; the last micro-batch's).
  std::map<int, double> skip_bytes;
  // Activation bytes one forward stashed, per stage of this rank (mean over
  // the step's micro-batches): what the simulator's cost model takes.
  std::map<int, double> stage_activation_bytes;
};

}  // namespace baton::runtime
