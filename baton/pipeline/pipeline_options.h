// What a Pipeline is asked to do: the schedule, how many micro-batches, how
// the layers are cut into stages, recomputation, where the ranks come from.
// Chained setters, as torch's option structs have:
//
//   baton::PipelineOptions().schedule("zb-h1").microbatches(8).balance("params")
//
// Names are the ones `baton train` takes as flags. The closed choices
// (precision, recompute, transport) are enums, also set by name: a bad name
// throws baton::Error at the setter; the others are checked when the
// Pipeline is built, and a bad one throws baton::Error naming it.
#pragma once

#include <torch/arg.h>
#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "baton/comm/communicator.h"
#include "baton/comm/rank_env.h"
#include "baton/comm/rank_layout.h"
#include "baton/core/choices.h"
#include "baton/runtime/pipemare.h"

namespace baton {

struct PipelineOptions {
  // A generator of schedule::schedule_names(): naive, gpipe, 1f1b, interleaved,
  // looped-bfs, zb-h1, zb-h2, zb-v, interleaved-zb, chimera, dualpipev, v-half, v-min,
  // zb-auto (which needs `sample`: it searches with the profiled layer costs),
  // and without a flush 2bw, pipedream, async, pipemare (see Pipeline::step).
  TORCH_ARG(std::string, schedule) = "1f1b";
  // A schedule file (baton's text format, or PyTorch's CSV when the name ends
  // in ".csv"; schedule::lowered_schedule) instead of a generator: it
  // fixes the micro-batch count and the stages, and its rank count must equal
  // pp. `schedule` and `virtual_stages` are then unused; `microbatches` must
  // equal the file's. Its own REDUCE_GRAD and REDUCE_TIED actions stay
  // (schedule/runnable.h).
  TORCH_ARG(std::string, schedule_file);
  // Micro-batches per step; a step's batch must hold at least this many samples.
  TORCH_ARG(int, microbatches) = 4;
  // Stage chunks per rank; 0: the schedule's default (2 for interleaved).
  TORCH_ARG(int, virtual_stages) = 0;
  // uniform | params | time | memory | optimal, or layer counts per stage
  // ("3,5,4"). Every method but uniform profiles the layers on `sample`.
  TORCH_ARG(std::string, balance) = "uniform";
  // One micro-batch of inputs, for the balancing methods that profile layers.
  TORCH_ARG(torch::Tensor, sample);
  // The same for a model of several inputs (Pipeline::step's list form);
  // when given, `sample` is ignored.
  TORCH_ARG(std::vector<torch::Tensor>, sample_inputs);
  // Activation recomputation: never | except_last | always | selective (the
  // layers' marked regions only, nn/recompute_region.h; gpt's and llama's
  // attention cores). By name too: parsed at once, an unknown name throws.
 public:
  PipelineOptions& recompute(Recompute mode) { return recompute_ = mode, *this; }
  PipelineOptions& recompute(std::string_view name) { return recompute(parse_recompute(name)); }
  Recompute recompute() const noexcept { return recompute_; }

 private:
  Recompute recompute_ = Recompute::Never;

  // Where the stages run: the CPU, or CUDA. "cuda" without an index means
  // cuda:LOCAL_RANK (the process's index on its machine). On a GPU the
  // Pipeline builds its own communicator on NCCL; a given communicator is
  // used as it is (tensors cross through its device). Balancing profiles the
  // layers on the CPU either way.
  TORCH_ARG(torch::Device, device) = torch::kCPU;
  // Every wait between ranks, and the rendezvous.
  TORCH_ARG(std::chrono::milliseconds, timeout) = comm::kDefaultTimeout;
  // Point-to-point between ranks: auto | shm | gloo (TransportKind); by name
  // too, parsed at once.
 public:
  PipelineOptions& transport(TransportKind kind) { return transport_ = kind, *this; }
  PipelineOptions& transport(std::string_view name) { return transport(parse_transport(name)); }
  TransportKind transport() const noexcept { return transport_; }

 private:
  TransportKind transport_ = TransportKind::kAuto;

  // The seed of lazily built layers (a ModelSpec's): a layer's initial weights
  // depend only on (seed, global layer index).
  TORCH_ARG(uint64_t, seed) = 1;
  // End every step with a blocking all-reduce of the loss, so every rank
  // waits for the slowest (kept to measure what overlapping steps buys). By
  // default steps overlap: see Pipeline::step().
  TORCH_ARG(bool, step_barrier) = false;
  // Pipeline ranks; 0: the world size / (dp * tp). The world must be dp * pp * tp ranks.
  TORCH_ARG(int, pp) = 0;
  // Data-parallel replicas of the pipeline. Ranks are numbered as
  // topology::Topology numbers them (see tp below; with tp = 1: world rank =
  // pp_index * dp + dp_index). Every rank passes step() the same global
  // mini-batch; replica d computes its d-th 1/dp share, and the gradients are
  // averaged over the replicas in buckets (REDUCE_GRAD actions).
  TORCH_ARG(int, dp) = 1;
  // Tensor-parallel ranks per pipeline stage (Megatron-LM): every
  // TransformerBlock layer is split over them (nn::tensor_parallel: heads,
  // output projection and MLP), other layers are whole on each. The world is
  // dp * pp * tp ranks, numbered as topology::Topology does (tp fastest, then
  // dp, then pp): world rank = (pp_index * dp + dp_index) * tp + tp_index.
  // Must divide every block's heads. Checkpoints hold whole layers: save()
  // gathers the split ones over tp, load() gives each tp rank its slice.
  TORCH_ARG(int, tp) = 1;
  // With tp > 1, Megatron-LM's scatter/gather of boundary activations: each
  // tp rank sends 1/tp of a stage's output (and of its gradient) to the next
  // stage, whose tp ranks all-gather it (ExecutorOptions::scatter_gather).
  TORCH_ARG(bool, tp_scatter_gather) = true;
  // Gradient bucket size in MiB for the dp all-reduces (DDP's bucket_cap_mb).
  TORCH_ARG(double, bucket_mb) = 25;
  // With dp > 1: each bucket's REDUCE_GRAD starts right after its last
  // backward, overlapping the rest of the step (true, DDP's and baton's
  // default), or every REDUCE_GRAD waits at the end of its rank's actions
  // (false; schedule::defer_grad_reductions), for measuring what the overlap
  // hides.
  TORCH_ARG(bool, overlap_grad_reduce) = true;
  // ZeRO stage 0-3 over the dp replicas (schedule/sharding.h, runtime/zero.h).
  // With dp > 1, each parameter is cut flat into dp chunks and
  // parameters() returns this replica's chunks (shards), so the caller's
  // optimizer keeps about 1/dp of the state; each step's UNSHARD actions
  // all-gather the chunks the others stepped before a stage's first compute.
  // 1: gradients all-reduced whole; 2: reduce-scattered, a replica keeping
  // its shard of each (the whole gradients freed once reduced); 3: as 2,
  // and the weights freed after a stage's last backward of each step (the
  // layers' parameters are empty between steps until eval(), save() or
  // named_parameters() gathers them). Gradients do not accumulate across
  // step() calls: each drops the last one's, the shards' included (read
  // them between step() and the optimizer's step). 2 and 3 refuse schedules
  // without a flush. With dp = 1 it changes nothing. save() gathers the
  // whole optimizer state; load() restores each replica's chunks, from a
  // checkpoint of any zero.
  TORCH_ARG(int, zero) = 0;
  // With zero() > 0 and dp > 1: each stage's UNSHARD goes one compute ahead
  // of the stage's first compute, so its all-gather overlaps that compute
  // (true), or right before it (false), to measure what the prefetch hides
  // (StepResult::unshard_wait_ms).
  TORCH_ARG(bool, prefetch_unshard) = true;
  // Global-norm gradient clipping (Megatron-LM's clip_grad): above 0, every
  // rank ends its step with a CLIP_NORM (schedule/clip_norm.h) that scales
  // the gradients so their norm over the whole model (runtime/clip.h: each
  // parameter once, whatever the dp, pp and tp) is at most this; 0: off.
  // last_step().grad_norm is the norm before the clip. A norm that is not
  // finite scales nothing: do not step the optimizer on that step. Refused
  // (baton::Error) for a value not finite or below 0, and for schedules
  // without a flush (2bw, pipedream, async, pipemare), whose updates never see a
  // step's whole gradient.
  TORCH_ARG(double, clip_grad_norm) = 0;
  // The layers' compute dtype: "fp32", "bf16" or "fp16" (runtime/precision.h:
  // autocast over fp32 master weights, boundaries sent in the compute dtype,
  // the loss in fp32; fp16 with dynamic loss scaling, whose overflows skip a
  // step: last_step().skip_update). Refused for schedules without a flush,
  // and fp16 on the CPU under LibTorch 1.13. By name too, parsed at once.
 public:
  PipelineOptions& precision(Precision dtype) { return precision_ = dtype, *this; }
  PipelineOptions& precision(std::string_view name) { return precision(parse_precision(name)); }
  Precision precision() const noexcept { return precision_; }

 private:
  Precision precision_ = Precision::Fp32;

  // Schedule "pipemare": PipeMare's learning-rate warm-up (warmup_steps; 0:
  // off) and discrepancy correction (correction, decay), runtime/pipemare.h.
  // Ignored by other schedules; a warm-up below 0 or a decay outside [0, 1)
  // is refused (baton::Error).
  TORCH_ARG(runtime::PipeMareOptions, pipemare);
  // Models with several inputs (Pipeline::step's list form): the indices of
  // the inputs every micro-batch shares as they are (a sequence x sequence
  // mask); the others are cut along dim 0 and must agree on it. With dp > 1
  // every replica gets them whole too.
  TORCH_ARG(std::vector<int>, whole_inputs);
  // The process group. Without one, the Pipeline joins the group that
  // `rank_env` describes, or else the one torchrun's variables (RANK,
  // WORLD_SIZE, MASTER_ADDR, MASTER_PORT) describe, or else runs alone. A
  // communicator given by reference must outlive the Pipeline; a shared one
  // is kept alive by it. Empty: none given.
  TORCH_ARG(std::shared_ptr<comm::Communicator>, communicator);

 public:
  PipelineOptions& communicator(comm::Communicator& world) {
    return communicator(comm::borrow(world));
  }
  TORCH_ARG(std::optional<comm::RankEnv>, rank_env) = std::nullopt;
};

// Whether the schedule ends every rank with a CLIP_NORM: with clipping, and
// with fp16, whose loss scale reads the norm for overflows.
inline bool schedules_clip_norm(const PipelineOptions& options) {
  return options.clip_grad_norm() > 0 || options.precision() == Precision::Fp16;
}

}  // namespace baton
