// What one run of the executor's interpreter holds: a training step, a drain
// or an evaluation (runtime/executor.h), per (stage, micro-batch) cell of the
// schedule it walks. Internal to the runtime: the executor, the carries
// between steps (runtime/carries.h) and the forward-only path share it.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/nn/layer_call.h"
#include "baton/runtime/executor.h"
#include "baton/schedule/schedule.h"

namespace baton::runtime::detail {

using Clock = std::chrono::steady_clock;

struct Step {
  // `schedule` and `placement` must outlive the step.
  // `drain_only`: runs only the backwards the last step carried (Executor::drain()).
  Step(const schedule::Schedule& schedule, const schedule::Placement& placement, bool drain_only)
      : schedule(schedule),
        placement(placement),
        stages(schedule.stages),
        microbatches(schedule.microbatches),
        forward_only(schedule.forward_only),
        drain_only(drain_only),
        input(cells()),
        output(cells()),
        grad_output(cells()),
        grad_input(cells()),
        activation_bytes(cells(), 0),
        recv_forward(cells()),
        recv_backward(cells()),
        skip_in(skip_cells()),
        skip_out(skip_cells()),
        skip_grad_in(skip_cells()),
        skip_grad_out(skip_cells()),
        recv_skip_forward(skip_cells()),
        recv_skip_backward(skip_cells()) {}

  size_t cell(int s, int mb) const { return static_cast<size_t>(s) * microbatches + mb; }
  // A skip connection's slot: (skip, micro-batch).
  size_t skip_cell(int k, int mb) const { return static_cast<size_t>(k) * microbatches + mb; }
  size_t skip_cells() const { return schedule.skips.size() * static_cast<size_t>(microbatches); }
  size_t cells() const { return static_cast<size_t>(stages) * microbatches; }

  const schedule::Schedule& schedule;
  const schedule::Placement& placement;
  int stages, microbatches;
  // Evaluation: no loss, no autograd; the last stage's outputs stay in `output`.
  bool forward_only;
  bool drain_only;
  bool carried_in = false;  // a schedule without a flush: the last step left backwards
  // Micro-batches of the mini-batch, cut on demand: the model's inputs and
  // the targets (one tensor).
  MicrobatchCuts inputs;
  MicrobatchCuts targets;
  std::vector<double> scales;
  // Per cell, the tensors crossing the stage's boundaries; empty: none yet.
  std::vector<nn::Tensors> input;   // the stage's input (leaves where they need a gradient)
  std::vector<nn::Tensors> output;  // the stage's output, or {the scaled loss} on the last stage
  // Gradients of the loss w.r.t. `output` and to send to the previous stage,
  // one per tensor (undefined where a tensor gets none).
  std::vector<nn::Tensors> grad_output;
  std::vector<nn::Tensors> grad_input;
  std::vector<double> activation_bytes;
  std::vector<std::optional<comm::RecvHandle>> recv_forward, recv_backward;
  // Skip connections (schedule::Skip), per (skip, micro-batch): the popping
  // stage's input (a leaf in training) and the gradient it sends back; the
  // stashing stage's output and the gradient that comes back for it.
  std::vector<torch::Tensor> skip_in, skip_out, skip_grad_in, skip_grad_out;
  std::vector<std::optional<comm::RecvHandle>> recv_skip_forward, recv_skip_backward;
  std::map<int, comm::RecvHandle> recv_loss;  // by sending rank
  std::vector<comm::SendHandle> sends;
  std::vector<comm::ReduceHandle> reductions;  // REDUCE_GRADs in flight
  // For each of them, its event in result.events, whose end becomes the
  // all-reduce's finish once waited for.
  std::vector<size_t> reduction_events;
  // On a CUDA device the scaled losses add up on the device, read once at the
  // end of the step (on the CPU they go straight into result.loss).
  torch::Tensor device_loss;
  double stashed_bytes = 0;
  StepResult result;
  Clock::time_point start = Clock::now();
  // ms from the step's start to `t` (the time axis of result.events).
  double ms_at(Clock::time_point t) const {
    return std::chrono::duration<double, std::milli>(t - start).count();
  }
};

}  // namespace baton::runtime::detail
