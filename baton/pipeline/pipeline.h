// baton::Pipeline: a model trained pipeline-parallel in two calls.
//
//   baton::Pipeline pipe(my_sequential, loss, baton::PipelineOptions().microbatches(8));
//   torch::optim::Adam adam(pipe.parameters(), 1e-3);
//   adam.zero_grad();
//   double loss = pipe.step(inputs, targets);
//   adam.step();
//
// Every rank of the process group builds the same Pipeline, each holding
// only its own stages. The layers are cut into stages by the balance; the
// schedule decides which rank runs which stage and in what order. The
// optimizer stays the caller's: step() accumulates gradients into this
// rank's parameters, and those equal single-device training on the whole
// mini-batch (up to floating-point reordering).
//
// Thread safety: one thread drives a Pipeline.
#pragma once

#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/comm/communicator.h"
#include "baton/comm/rank_layout.h"
#include "baton/nn/layer_spec.h"
#include "baton/partition/partition.h"
#include "baton/pipeline/pipeline_options.h"
#include "baton/runtime/step_result.h"
#include "baton/schedule/schedule.h"

namespace baton {

// Which saves a checkpoint folder keeps (baton/pipeline/checkpoint.h): the
// newest `keep_last` (at least 1; 2 by default, so that a corrupt newest
// save still leaves one), and never a `protect`ed folder (e.g. the one a run
// resumed from), whatever its age.
struct SaveOptions {
  int keep_last = 2;
  std::vector<std::string> protect;
};

class Pipeline {
 public:
  // Both constructors throw baton::Error naming the parameter and value for:
  // an empty model, a schedule undefined for (pp, microbatches, virtual
  // stages) (the generator's message), more stages than layers, a bad
  // balance, recompute, transport or device, dp x pp not equal to the world
  // size, a bucket_mb not above 0, a balance that profiles without a sample. Joining the process
  // group (and profiling, which averages over ranks) is collective: every rank builds its Pipeline
  // at the same point.

  // Each child of `model` becomes one layer, in order; this rank keeps the
  // children of its stages (the others stay the caller's, untouched). Every
  // rank must build the Sequential with the same initial weights (seed
  // torch before building it). `loss` is the MEAN loss over a batch.
  Pipeline(torch::nn::Sequential model, runtime::LossFn loss, PipelineOptions options = {});

  // Layers built lazily: this rank builds only its own, seeded by
  // (options.seed(), global index). An empty `loss` takes model.loss.
  Pipeline(nn::ModelSpec model, runtime::LossFn loss, PipelineOptions options = {});

  Pipeline(Pipeline&&) noexcept;
  Pipeline& operator=(Pipeline&&) noexcept;
  ~Pipeline();

  // One training step on a mini-batch: gradients accumulate into
  // parameters() (zero them before, step the optimizer after). Returns the
  // mini-batch's mean loss on every rank. `inputs` is read only where this
  // rank holds stage 0, `targets` only where it holds the last stage, but
  // every rank passes the same batch size. With dp > 1 every rank passes the
  // same global batch; replica d computes its d-th 1/dp of it and the
  // gradients are averaged over the replicas (REDUCE_GRAD) before step()
  // returns, so they are the whole batch's. Throws baton::Error when the batch
  // does not split into dp equal shares, or a share holds fewer samples than
  // micro-batches.
  //
  // Every rank calls step() (and eval()) the same number of times in the
  // same order, but step() is not a barrier: it returns once this rank's own
  // part of the step is done, so a rank runs its optimizer and starts the
  // next step while slower ranks still finish this one (what zb-h2 and zb-v
  // need to keep their bubble at zero from step to step). The loss needs no
  // collective over the pipeline: the last stage's rank sends its loss to
  // every other rank as soon as its last forward is done, and that message is
  // bound to arrive before the backward that ends any rank's step
  // (runtime/executor.h). With dp > 1 the replicas' losses are then averaged
  // over the dp group (a collective among the replicas of this pipeline rank,
  // which REDUCE_GRAD already synchronises). With
  // PipelineOptions::step_barrier the step ends with an all-reduce instead.
  double step(const torch::Tensor& inputs, const torch::Tensor& targets);
  // A model of several inputs (hidden states, positions, a mask): the first
  // layer takes them as a std::vector<torch::Tensor> (nn/layer_call.h), and
  // each is cut into micro-batches along dim 0 unless
  // PipelineOptions::whole_inputs lists it. A rank holding neither the first
  // nor the last stage may pass an empty list (or undefined tensors) and an
  // undefined target: the ranks that read them check the batch.
  double step(const std::vector<torch::Tensor>& inputs, const torch::Tensor& targets);
  //
  // A schedule without a flush (2bw, PipeDream-2BW): the pipeline runs on
  // from step to step, each rank carrying its last backwards into the next
  // step, and the weights are double-buffered (runtime/weight_versions.h).
  // Every micro-batch of step t runs on the weights parameters() held when
  // step t began; after step t, parameters()' gradients are step t - 1's
  // (none after the first step), so the optimizer step after step t applies
  // them: W(t+1) = W(t) - lr * grad(W(t-1)), one update stale. flush() ends
  // the pipeline: it runs the carried backwards and leaves the last step's
  // gradients (step the optimizer once more to apply them), and returns what
  // the drain did (last_step() stays the last step's). dp and tp must be 1;
  // save() and load() refuse.
  runtime::StepResult flush();
  //
  // pipedream (PipeDream with weight stashing): the same order as 2bw, but
  // every stage updates after each of its micro-batch backwards, with that
  // micro-batch's gradient (its share of the mini-batch's mean loss, so m
  // updates move as far as one step of lr), and a micro-batch's backward runs
  // on the weights its forward used. The updates run inside step(): give the
  // Pipeline your optimizer (built on parameters()) once, and do not step it
  // yourself; flush() runs the last updates. Ignored by other schedules.
  // async (AMPNet-style) likewise, without stashing: a backward runs on the
  // weights as they are when it runs. pipemare as async, with PipeMare's
  // techniques (PipelineOptions::pipemare, runtime/pipemare.h): during its
  // warm-up an update scales the optimizer's learning rate (every param
  // group's) by the stage's factor and puts it back after.
  void set_optimizer(torch::optim::Optimizer* optimizer);
  // Whether step() runs the optimizer itself (pipedream, async, pipemare).
  bool updates_inside_step() const;

  // Clips the gradients step() left by their global norm, as
  // torch::nn::utils::clip_grad_norm_ does on one device (runtime/clip.h:
  // each parameter of the model once, whatever the dp, pp and tp), and
  // returns the norm before the clip. A collective over every rank, between
  // step() and the optimizer step; PipelineOptions::clip_grad_norm does the
  // same inside step(), as a scheduled action. Throws baton::Error for a
  // max_norm not finite or not above 0, and for a schedule without a flush.
  double clip_grad_norm(double max_norm);

  // Forward only, without autograd. Returns the model's output for `inputs`
  // on the rank holding the last stage; an undefined tensor on the others
  // (with Chimera, each of its two ranks returns the micro-batches it
  // finished, in order). Every rank must call it (a collective); with dp > 1
  // each replica computes the whole output.
  torch::Tensor eval(const torch::Tensor& inputs);
  // Several inputs, as step() takes them. A rank holding only middle stages
  // may pass an empty list; it then takes the batch to hold at least
  // microbatches() samples, so pass such a batch to every rank.
  torch::Tensor eval(const std::vector<torch::Tensor>& inputs);
  // eval() in `microbatches` micro-batches, keeping their indices: the
  // outputs of the micro-batches this rank finished, by index.
  std::map<int, torch::Tensor> eval_microbatches(const torch::Tensor& inputs, int microbatches);
  std::map<int, torch::Tensor> eval_microbatches(const std::vector<torch::Tensor>& inputs,
                                                 int microbatches);

  // This rank's parameters, for the caller's optimizer (with
  // PipelineOptions::zero() > 0 and dp > 1, the shards this replica steps).
  std::vector<torch::Tensor> parameters() const;
  // Every tensor holding this rank's parameters now, without gathering any:
  // the layers' parameters (empty under ZeRO-3 between steps) and, under
  // ZeRO, the shards (views of them under ZeRO-1/2). Their storages and
  // .grad()s are what the rank holds (count each storage once).
  std::vector<torch::Tensor> held_parameters() const;
  // This rank's parameters keyed "layer.<global index>.<name>", e.g.
  // "layer.3.weight": the same key whatever the layout (under ZeRO-3
  // gathered first, a dp collective, and whole until the next step).
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;

  // Checkpoints (the format: baton/pipeline/checkpoint.h). save() writes
  // into `dir` the layers this rank holds (parameters and buffers, one file
  // per global layer), `optimizer`'s state for their parameters (SGD, Adam
  // or AdamW built on parameters(); null: none), steps(), rank 0's CPU RNG
  // state and `extra`, the caller's JSON (e.g. an lr schedule's or a data
  // loader's position). The files hold whole layers and their whole
  // optimizer state whatever the layout: tensor-parallel slices are gathered
  // over the tp group, and under zero() each parameter's state is gathered
  // from the replicas' shards. A collective: every rank calls it at the
  // same point; atomic: a save that dies leaves the previous checkpoint in
  // `dir` whole. load() restores all of it from a checkpoint that any pp,
  // dp, tp, zero, balance or schedule of the same model saved, into this
  // Pipeline (each tp rank its slice) and `optimizer` (built on parameters(),
  // its lr set to the saved one; under zero(), the state of this replica's
  // shards), sets steps() and returns `extra`. It reads only this rank's
  // files (no collective). Both
  // throw baton::Error naming the file and what is wrong: a missing or
  // truncated file, another model, layer count, tied weights, parameter
  // name, shape, dtype or optimizer kind, a file that cannot be written.
  // save() writes only into an empty folder or a checkpoint folder of its
  // own, never over an existing file, and removes only step folders that
  // its own manifest lists beyond `options.keep_last`.
  void save(const std::string& dir, torch::optim::Optimizer* optimizer = nullptr,
            const nlohmann::json& extra = nlohmann::json::object(),
            const SaveOptions& options = {}) const;
  nlohmann::json load(const std::string& dir, torch::optim::Optimizer* optimizer = nullptr);

  // This rank in the world ((pp index * dp + dp index) * tp + tp index), and the world's size.
  int rank() const;
  int world_size() const;
  // The global layer indices of each stage this rank holds, by stage:
  // {stage, {first layer, ..., last layer}}.
  std::vector<std::pair<int, std::vector<int>>> stage_layers() const;

  // What the runtime did and decided, for tools built on the façade
  // (`baton train` reports and draws them).
  const schedule::Schedule& schedule() const;
  const partition::Partition& partition() const;
  const runtime::StepResult& last_step() const;
  // This rank's place in the dp x pp x tp grid and its groups.
  const comm::RankLayout& layout() const;
  // The world's communicator (a solo one when the Pipeline runs alone).
  comm::Communicator& communicator() const;
  // With dp > 1: every stage's gradient buckets, bytes in reduction order (the
  // REDUCE_GRADs the schedule holds); empty with dp = 1.
  const std::vector<std::vector<double>>& gradient_bucket_bytes() const;
  // The steps run so far.
  int64_t steps() const;

 private:
  struct State;
  // Joins the world, plans the stages and builds the executor (pipeline.cpp:
  // each step a function of its inputs).
  void build(nn::ModelSpec model, runtime::LossFn loss, PipelineOptions options);
  // ZeRO: every replica gathers the shards the others stepped (and under
  // ZeRO-3 the weights it freed), a dp collective, once per step; ZeRO-3
  // then frees them again. (Logically const: the shards' values are the
  // model's.)
  void gather_parameters() const;
  void release_parameters() const;

  std::unique_ptr<State> state_;
};

}  // namespace baton
