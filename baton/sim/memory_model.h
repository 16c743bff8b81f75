// The activation model: what a rank holds at each action of its step, and
// its peak, from per-layer bytes measured by the counting allocator
// (runtime/memory_profile.h) and the schedule's order. Torch-free.
//
// A stage's micro-batch keeps, from its F until its B, the tensors its
// layers' graphs save (each boundary inside the stage once), the stage's
// output (the executor holds it until the B), and on the last stage what
// the loss saves. Its input is held anyway (a received buffer, the data, or
// the previous stage's output), so it is not counted again. A B runs its
// layers last to first: while layer i's backward runs, the layers after it
// have freed their graphs, and layer i holds its graph, the gradient coming
// in, its temporaries and its input's gradient; the B's peak is the most of
// these over its layers. It leaves the input gradient to send.
#pragma once

#include <optional>
#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::sim {

// One layer on one micro-batch, in bytes.
struct LayerMemory {
  double graph_bytes = 0;     // what its recorded graph holds once input and output are dropped
  bool keeps_input = false;   // the graph saved the input (it is in graph_bytes)
  bool keeps_output = false;  // the graph saved the output (it is in graph_bytes)
  double input_bytes = 0;
  double output_bytes = 0;
  // The output as a stage hands it on: its floating-point tensors in the
  // compute dtype (bf16, fp16), as the executor casts a boundary; 0: as
  // output_bytes.
  double output_wire_bytes = 0;
  // The messages a stage ending here sends forward (the output on the wire)
  // and receives back (its gradient), where the executor packs several
  // tensors into one bundle, a copy with a header (comm/tensor_bundle.h),
  // as llama's hidden states with their positions; 0: the one tensor crosses
  // as itself.
  double output_message_bytes = 0;
  double output_gradient_message_bytes = 0;
  double forward_extra = 0;  // most bytes above the forward's end during it (temporaries)
  // Most bytes above the backward's start during it, with the gradient
  // coming in held throughout (as a stage holds the gradient it received)
  // and the output only where the graph saved it.
  double backward_extra = 0;
  // Most bytes held during its backward above what was held before its
  // forward, as a layer inside a stage runs it: its graph (freed as the
  // backward goes), the gradient coming in (freed once used), its
  // temporaries and its input's gradient. The layers after it in the stage
  // have freed their graphs by then (a conv's peak comes once the pooling
  // and activation after it have let go of theirs).
  double backward_peak_bytes = 0;
  // Under bf16 or fp16: its weights cast to the compute dtype, made at the
  // step's first use and cached until the step ends (one autocast region a
  // step), shared by the micro-batches; not in graph_bytes.
  double weight_cast_bytes = 0;
  // Of what the graph keeps, what a split backward's I leaves for its W (the
  // inputs and output gradients of layers that defer their weight gradients).
  double weight_stash_bytes = 0;
  // Of weight_stash_bytes, the gradient coming in, where the W keeps that
  // very tensor (a Linear last in the layer, on the output's gradient as
  // it arrives): on a stage's last layer that gradient is the one received
  // or handed on, not a new tensor, and it lives until the W.
  double weight_stash_output_gradient_bytes = 0;
  // As backward_extra and backward_peak_bytes, for a split backward's I:
  // the weight gradients deferred, their inputs and output gradients kept
  // as the I goes (an I's peak can pass its B's: gpt's block holds its MLP's
  // 4h-wide gradient for the W while attention's backward runs). Unset: as
  // the B (a layer that defers nothing).
  std::optional<double> input_backward_extra;
  std::optional<double> input_backward_peak_bytes;
  // Under bf16 or fp16: of weight_cast_bytes, the casts whose gradients
  // autograd's engine carries back to the fp32 weights (autocast's cached
  // casts with a graph, as a convolution's; a baton Linear accumulates its
  // own and has none). The engine runs the nodes it has ready newest first,
  // and a cast's node is as old as the F that made it: in a B whose
  // micro-batch did not make the casts, every layer's cast gradients wait
  // until the B's end (resnet bf16 p = 2 rank 1: 100 MB above the step's
  // first B).
  double cast_gradient_bytes = 0;
};

struct ModelMemory {
  std::vector<LayerMemory> layers;
  // [i]: layer i on its input as a stage boundary delivers it (floating
  // tensors in the compute dtype, bf16 or fp16), for a stage that starts at
  // layer i; empty, or fewer entries: as layers[i] (fp32 runs).
  std::vector<LayerMemory> stage_inputs;
  LayerMemory loss;  // the loss on the last layer's output (its input: that output)
  double microbatch = 1;
};

// One stage's micro-batch, in bytes.
struct StageMemory {
  double stash = 0;          // held from the F's end until the B
  double forward_extra = 0;  // most beyond the stash during the F
  // A B's most beyond what is held at its start, in two parts: what its
  // layers' temporaries and gradients add (backward_extra), and the graphs
  // the layers after the one in flight have freed by then (backward_freed,
  // at most 0), taken from the stash.
  double backward_extra = 0;
  double backward_freed = 0;
  // As backward_extra and backward_freed, for a split backward's I: its
  // layers' I figures, with the W stashes the layers after the one in
  // flight have left.
  double input_backward_extra = 0;
  double input_backward_freed = 0;
  // Its layers' cast gradients (LayerMemory::cast_gradient_bytes); and the
  // B's and the I's figures in a micro-batch whose F did not make the
  // stage's weight casts, when there are any: the cast gradients of the
  // layers done held on to the B's end.
  double cast_gradients = 0;
  double late_backward_extra = 0;
  double late_backward_freed = 0;
  double late_input_backward_extra = 0;
  double late_input_backward_freed = 0;
  double weight_stash = 0;  // held from a split backward's I until its W
  // The gradient received (or handed on) for the output, which the W keeps
  // (LayerMemory::weight_stash_output_gradient_bytes): held until the W,
  // not freed by the I; not in weight_stash.
  double weight_stash_output_gradient = 0;
  double weight_casts = 0;  // held from the stage's first F of a step until its end
  double input_bytes = 0;   // its input (a received message when the stage before is elsewhere)
  double output_bytes = 0;  // its output (a sent message; the gradient received for it)
  // Bundles (LayerMemory::output_message_bytes; 0: the tensor as itself):
  // the messages that carry its input (RECV_F) and its input's gradient
  // (SEND_B), and its output (SEND_F) and the output's gradient (RECV_B).
  double input_message = 0;
  double input_gradient_message = 0;
  double output_message = 0;
  double output_gradient_message = 0;
};

// Layers [first, end) as one stage; `last`: the stage computes the loss.
StageMemory stage_memory(const ModelMemory& model, int first, int end, bool last);

// What each layer keeps from its F until its B on one micro-batch: layer i's
// share of the stash of a stage holding layers 0..i (the last: with the
// loss's graph), at least 0. A stage of layers [a, b) keeps about their sum
// (exactly, up to its two boundaries). What `--balance memory` cuts by and a
// profile's activation_bytes.
std::vector<double> layer_kept_bytes(const ModelMemory& model);

// What a rank holds besides its steps' activations and messages.
struct StaticMemory {
  double parameters = 0;
  double gradients = 0;  // the parameters' gradients
  double optimizer = 0;
  double other = 0;  // the data batch and whatever else lives outside a step
  // The gradients are freed between steps (LibTorch 2.x's zero_grad sets
  // them to none) and come back at each stage's first B.
  bool gradients_freed = false;
  // A sent message of at most these bytes is copied out at the send and not
  // held (the shared-memory transport's inline messages,
  // comm::shm_inline_bytes); a larger one stays held by its send until the
  // step ends. 0: every send holds its tensor (Gloo).
  double sends_copied_up_to = 0;
  // A received message up to this size exists only from its arrival (taken
  // as its RECV action) until the B or I of its micro-batch uses it up: the
  // shared-memory transport's messages below the size whose buffers it
  // keeps (comm::shm_kept_receive_bytes), and on a GPU every message (it
  // arrives on the host and is copied to the device when the executor takes
  // it). A larger one is held all step: posted at its start, or received
  // into a buffer kept from step to step. 0: all are.
  double receives_on_arrival_up_to = 0;
  // ZeRO: the gradient shards cut from the whole gradients once they are
  // reduced, held beside them for a moment (runtime/zero.h).
  double gradient_shards = 0;
};

// A replica's parameters, gradients and optimizer state under ZeRO
// (runtime/zero.h), the one rule the ranks' prediction and the profile's
// (plan/profile_memory.h) share. `whole`: its stages' weights as the step
// uses them (under ZeRO-3 every stage gathered at once, as the walk finds
// at the peak for every schedule) and their gradients during the step;
// `stepped`: what its optimizer steps, a 1/dp shard under ZeRO with dp > 1.
// ZeRO-3 keeps the shards at rest beside the gathered weights; from ZeRO-1
// on the gradient shards are cut beside the whole gradients at the step's end.
StaticMemory replica_static(double whole, double stepped, int zero, int dp,
                            double optimizer_state_per_parameter_byte);

// A rank's peak, by the allocator's categories (comm/memory_counter.h).
struct MemoryPrediction {
  double peak = 0;
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0, buffers = 0, other = 0;
};

// The most a rank holds during each of its actions (`during[i]`: the i-th
// of schedule.actions[rank], temporaries included) and during the
// optimizer's step after them: the walk over time, for a memory lane
// (trace::Timeline::memory). The peak is the most of these.
struct MemoryTrace {
  std::vector<double> during;
  double optimizer_step = 0;
};

// Walks `schedule`'s actions of `rank` (lowered: with its sends and
// receives), `stages[s]` for each stage it runs. `recomputed(mb)`: whether
// micro-batch mb's F keeps nothing and its B runs the F again. The peak is
// the most held at any action: during an F or B with its temporaries, or at
// the optimizer's step (`optimizer_extra` beyond the static bytes, e.g.
// Adam's temporaries). A schedule without a flush is walked at steady
// state: the micro-batches whose backwards it carries hold their stashes
// over the step boundary; the weight versions' gradient buffers are never
// freed, and under per-step updates (2BW) a rank holds all through a second
// copy of `fixed.parameters` (the previous step's weights) and two more
// gradient buffers (runtime/weight_versions.h). `trace`, when given, receives
// the walk action by action.
MemoryPrediction predict_rank_memory(const schedule::Schedule& schedule, int rank,
                                     const std::vector<StageMemory>& stages,
                                     const StaticMemory& fixed, const std::vector<bool>& recomputed,
                                     double optimizer_extra = 0, MemoryTrace* trace = nullptr);

}  // namespace baton::sim
