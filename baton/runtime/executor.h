// The executor: runs this rank's part of a lowered schedule on real tensors.
// Every action comes from the schedule (F, B, I, W, SEND/RECV); nothing about
// the order is decided here. Receives are posted when the step starts and
// sends are asynchronous, so communication overlaps compute; every wait has
// the communicator's timeout and names the rank, stage and action.
//
// Steps overlap: run_step() returns once this rank's own part is done (its
// actions, its sends, the loss parts it waits for), with no barrier, so a
// rank may start step k+1 while its peers still run step k. Messages of the
// two steps cannot be confused: see comm/tag.h.
//
// The step's loss without a collective: a rank holding the last stage sends
// its part of the loss to every other rank right after its last forward of
// that stage, and every rank waits for those parts at the end of its step.
// The last stage's forwards precede a backward that every rank runs (the
// backward of the last micro-batch to leave the last stage), so the parts are
// on their way before any rank could end its step: waiting for them costs a
// message, never a barrier.
//
// Gradients: each micro-batch's loss is the model's mean loss times
// size_i / B, so the gradients accumulated over a step equal those of the
// whole mini-batch on one device. The schedule's REDUCE_GRAD and REDUCE_TIED
// actions run the reducers (runtime/reducers.h): REDUCE_GRAD starts the
// all-reduce of one gradient bucket over the dp group without blocking and
// the step waits for all of them at its end, so the gradients after
// run_step() are the dp group's average; REDUCE_TIED sums the copies of a
// parameter held more than once in the pipeline (a stage on several ranks, a
// tied weight), after the step's REDUCE_GRADs, so every copy steps alike.
// ZeRO (ExecutorOptions::zero with dp > 1; runtime/zero.h): UNSHARD,
// RESHARD and REDUCE_SCATTER run the stages' shards, and shards() are what
// the caller's optimizer steps.
//
// Schedules without a flush (Schedule::carries, 2bw): the backwards a rank
// carries into the next step keep their state between run_step() calls, and
// the executor keeps weight versions (runtime/carries.h): parameters() are
// then the masters the caller's optimizer steps. 2bw: after step t their
// gradients are step t - 1's; pipedream, async and pipemare: the executor
// runs the optimizer step given to set_update() after every backward. drain()
// runs the carried backwards of the last step (every rank calls it), leaving
// 2bw's last gradients (the others' last updates).
//
// Evaluation is a schedule too: evaluate() runs the lowered
// schedule::forward_only() of the training schedule through the same
// interpreter (tensor-parallel scatter/gather included), without autograd.
#pragma once

#include <torch/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/comm/rank_layout.h"
#include "baton/core/choices.h"
#include "baton/nn/layer_call.h"
#include "baton/nn/layer_spec.h"
#include "baton/runtime/clip.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/pipemare.h"
#include "baton/runtime/precision.h"
#include "baton/runtime/reducers.h"
#include "baton/runtime/stage.h"
#include "baton/runtime/step_result.h"
#include "baton/runtime/weight_versions.h"
#include "baton/runtime/zero.h"
#include "baton/schedule/schedule.h"
#include "baton/trace/timeline.h"

namespace baton::runtime {

// The recomputation modes and their parser live in core (core/choices.h).
using ::baton::parse_recompute;
using ::baton::Recompute;
using ::baton::to_string;

// Whether micro-batch `microbatch` of `microbatches` recomputes its forward.
bool recomputes(Recompute recompute, int microbatch, int microbatches);

struct ExecutorOptions {
  Recompute recompute = Recompute::Never;
  // Where this rank's stages compute (their modules must already be there).
  // On a CUDA device the mini-batch is copied in from pinned host memory
  // without blocking, received tensors are moved to it when the
  // communicator delivers them elsewhere, and the step's loss is read back
  // once per step, not once per micro-batch.
  torch::Device device = torch::kCPU;
  // Send the last stage's loss to every rank (StepResult::minibatch_loss).
  // Off, minibatch_loss stays NaN on ranks without the last stage, and the
  // caller sums StepResult::loss over ranks itself.
  bool share_loss = true;
  // Data parallelism: REDUCE_GRAD averages a bucket's gradients over the
  // layout's dp group (the identity with dp = 1). `bucket_bytes`: the size
  // that packed the schedule's buckets
  // (schedule::gradient_bucket_members over each stage's parameters in
  // order); bucket k of a stage is the k-th of those. The schedule must
  // reduce each stage of this rank in exactly that many buckets (one when
  // it has no parameters); the constructor throws otherwise.
  double bucket_bytes = 25.0 * (1 << 20);
  // Tensor parallelism (the layout's tp group has more than one rank). With
  // `scatter_gather` (Megatron-LM's scatter/gather), every tp rank of a
  // stage sends only its 1/t of each boundary tensor (a slice of the last
  // dimension, which t must divide) to its peer of the same tp index, and the
  // receivers all-gather the slices over their tp group: pipeline traffic
  // drops by t; the gather runs on the (fast, intra-node) tp links.
  bool scatter_gather = true;
  // Tied weights: each entry lists the copies of one weight as (stage,
  // parameter name as Stage::module().named_parameters() gives it, e.g.
  // "0.token.weight"). REDUCE_TIED sums their gradients; a replicated
  // stage's parameters need no entry. Every rank is given the same list.
  using TiedCopy = runtime::TiedCopy;
  std::vector<std::vector<TiedCopy>> tied;
  // CLIP_NORM (runtime/clip.h) scales the gradients so that their global
  // norm is at most this; infinite: it measures the norm only.
  double clip_grad_norm = std::numeric_limits<double>::infinity();
  // The layers' compute dtype (runtime/precision.h). fp16 needs a CLIP_NORM
  // in the schedule: its norm tells every rank about an overflow, and it
  // unscales the gradients.
  Precision precision = Precision::Fp32;
  // The model's inputs (run_step's list) that every micro-batch shares as
  // they are, by index (a mask of sequence x sequence); the others are cut
  // along dim 0 (runtime/microbatch.h).
  std::vector<int> whole_inputs;
  // Schedule "pipemare": PipeMare's learning-rate warm-up and discrepancy
  // correction (runtime/pipemare.h); ignored by every other schedule.
  PipeMareOptions pipemare;
  // ZeRO stage 0-3 (runtime/zero.h); with a dp group of more than one rank,
  // 1-3 shard the stages' parameters over it (the schedule's UNSHARD,
  // RESHARD and REDUCE_SCATTER: schedule/sharding.h).
  int zero = 0;
};

class Carries;
namespace detail {
struct Step;
}

class Executor {
 public:
  // Runs pipeline rank layout.pipeline_rank() of `schedule`, whose ranks are
  // the layout's pipeline (schedule rank p is world rank layout.world_rank_of(p)).
  // `stages`: the stages this rank holds (any order). Throws baton::Error
  // when the schedule's rank count is not the layout's pp.
  // REQUIRES: `schedule` is lowered and valid; stages match its placement.
  Executor(schedule::Schedule schedule, comm::RankLayout layout,
           std::vector<std::shared_ptr<Stage>> stages, LossFn loss, ExecutorOptions options = {});
  ~Executor();

  // One training step on a mini-batch. `inputs` is used only where this rank
  // holds stage 0 of a micro-batch, `targets` only where it holds the last
  // stage (elsewhere they may be undefined, or empty). Gradients accumulate
  // into the stages' parameters (zero them before). Every rank runs the same
  // sequence of run_step() and evaluate() calls. The list form gives the
  // model several inputs (hidden states, positions, a mask: the first
  // layer's std::vector<torch::Tensor>).
  StepResult run_step(const torch::Tensor& inputs, const torch::Tensor& targets);
  StepResult run_step(const nn::Tensors& inputs, const torch::Tensor& targets);

  // Forward only, no autograd (evaluation): runs this rank's actions of the
  // lowered schedule::forward_only() of the training schedule for
  // `microbatches` (built once per count). Returns the last stage's outputs
  // for the micro-batches this rank finishes, keyed by micro-batch.
  // (runtime/forward_only.cpp)
  std::map<int, torch::Tensor> evaluate(const torch::Tensor& inputs, int microbatches);
  std::map<int, torch::Tensor> evaluate(const nn::Tensors& inputs, int microbatches);

  // A schedule without a flush: runs the backwards the last step carried
  // (nothing if none), so that parameters()' gradients are the last step's.
  // A collective like run_step(); the next run_step() starts a fresh pipeline
  // (its carried actions skipped, as in the first step).
  StepResult drain();
  // Whether backwards of the last step wait for the next step or drain().
  bool carrying() const;
  // pipedream, async and pipemare: the optimizer step to run after each
  // micro-batch's backward, with a factor to apply to its learning rate
  // (pipemare's warm-up; 1 otherwise) (runtime/weight_versions.h); ignored
  // by every other schedule.
  void set_update(std::function<void(double lr_scale)> update);
  // Whether the schedule updates inside the step (pipedream, async,
  // pipemare), and whether it still lacks its update.
  bool updates_per_microbatch() const;
  bool needs_update() const { return updates_per_microbatch() && !versions()->has_update(); }

  const schedule::Schedule& schedule() const { return schedule_; }
  int rank() const { return rank_; }
  // The stages this rank holds, by stage index.
  const std::map<int, std::shared_ptr<Stage>>& stages() const { return stages_; }
  std::vector<torch::Tensor> parameters() const;
  // ZeRO's shards (null without ZeRO or with one replica): what the caller's
  // optimizer steps, and the gathers eval and checkpoints need.
  ZeroShards* zero() const { return zero_.get(); }
  // The global norm of the gradients now (a collective over the world),
  // after scaling them so that it is at most `max_norm` (runtime/clip.h).
  double clip_grad_norm(double max_norm);
  // Steps run so far; errors name step steps_run() + 1. A resumed run sets it.
  int64_t steps_run() const { return steps_run_; }
  void set_steps_run(int64_t steps) { steps_run_ = steps; }

 private:
  using Step = detail::Step;
  // A lowered schedule and where its cells run: what the interpreter walks.
  struct Program {
    schedule::Schedule schedule;
    schedule::Placement placement;
  };
  WeightVersions* versions() const;
  StepResult run(const nn::Tensors& inputs, const torch::Tensor& targets, bool drain_only);
  // The model's inputs on this rank's device, cut into micro-batches.
  MicrobatchCuts split(const nn::Tensors& inputs, int microbatches) const;
  // The interpreter: posts the step's receives, then runs its actions in order.
  void interpret(Step& step);
  bool skipped(const Step& step, size_t index) const;
  void run_action(Step& step, size_t index);
  // One per kind of action.
  void compute_forward(Step& step, const schedule::Action& a);
  void compute_backward(Step& step, const schedule::Action& a);
  void send(Step& step, const schedule::Action& a);
  void receive(Step& step, const schedule::Action& a);
  void reduce_grad(Step& step, const schedule::Action& a,
                   std::chrono::steady_clock::time_point started);
  void reduce_scatter(Step& step, const schedule::Action& a,
                      std::chrono::steady_clock::time_point started);
  void reduce_tied(Step& step, const schedule::Action& a, size_t index);
  void clip_norm(Step& step);
  // The stage's forward of a's micro-batch; on the last stage of a training
  // step, the scaled loss, counted into the step's when `activation_bytes`
  // is given (the first forward, which records the stashed bytes there).
  nn::Tensors stage_forward(Step& step, const schedule::Action& a, double* activation_bytes);
  bool recomputes(int microbatch) const;
  void count_loss(Step& step, const torch::Tensor& loss) const;
  void send_loss(Step& step);
  void gather_loss(Step& step);
  std::string describe(const schedule::Action& action, int peer) const;
  // Scatter/gather of boundary tensors over the tp group (identity without).
  torch::Tensor tp_scatter(const torch::Tensor& whole, const schedule::Action& action) const;
  torch::Tensor tp_gather(const torch::Tensor& slice, const schedule::Action& action) const;
  // The world rank of pipeline rank `pipeline_rank`; of the rank on the
  // other side of a communication action.
  int peer(int pipeline_rank) const { return layout_.world_rank_of(pipeline_rank); }
  int peer_of(const Step& step, const schedule::Action& a) const;
  comm::Tag tag_of(const schedule::Action& a) const;
  // A skip connection's transfers (Action::skip >= 0).
  void send_skip(Step& step, const schedule::Action& a);
  // Waits for a RECV's message, unpacks and gathers it, and makes a
  // training forward's floating-point inputs leaves that need a gradient.
  nn::Tensors take_received(Step& step, const schedule::Action& a,
                            std::optional<comm::RecvHandle>& handle);
  void receive_skip(Step& step, const schedule::Action& a);
  // `tensor` on this rank's device (itself when it is there already).
  torch::Tensor on_device(const torch::Tensor& tensor) const;
  // Waits for the REDUCE_GRADs in flight and ends their events at their
  // all-reduces' finish.
  void wait_reductions(Step& step);
  // StepResult::reduction_ms and exposed_reduction_ms from the step's events.
  void measure_reductions(StepResult& result) const;

  schedule::Schedule schedule_;
  schedule::Placement placement_;
  std::map<int, Program> forward_only_;  // lowered forward_only(), by micro-batches
  int rank_;
  std::map<int, std::shared_ptr<Stage>> stages_;
  LossFn loss_;
  comm::RankLayout layout_;
  comm::Communicator& comm_;  // layout_.world
  ExecutorOptions options_;
  // The ranks holding the last stage, ascending; and the index in this
  // rank's actions of its last forward of that stage (SIZE_MAX: none).
  std::vector<int> loss_ranks_;
  // Per stage, the skips (schedule::Skip) it pops and those it stashes.
  std::vector<std::vector<int>> skips_into_, skips_out_of_;
  size_t last_loss_forward_ = SIZE_MAX;
  int64_t steps_run_ = 0;
  std::unique_ptr<BucketReducer> buckets_;
  std::unique_ptr<ZeroShards> zero_;
  std::unique_ptr<TiedReducer> tie_groups_;
  std::unique_ptr<NormClipper> clipper_;
  LossScaler scaler_;  // fp16 only
  std::unique_ptr<Carries> carries_;
};

}  // namespace baton::runtime
