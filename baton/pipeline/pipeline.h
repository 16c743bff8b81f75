// baton::Pipeline: a model trained pipeline-parallel in two calls.
//
//   baton::Pipeline pipe(my_sequential, loss, baton::PipelineOptions().microbatches(8));
//   torch::optim::Adam adam(pipe.parameters(), 1e-3);
//   adam.zero_grad();
//   double loss = pipe.step(inputs, targets);
//   adam.step();
//
// Every rank builds the same Pipeline and holds only its own stages. The
// gradients step() leaves equal single-device training on the whole
// mini-batch (up to floating-point reordering). One thread drives a
// Pipeline. The guide: docs/library.md.
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
  // Collective: every rank builds its Pipeline at the same point. Throws
  // baton::Error naming the option and value for any layout or option the
  // plan refuses (pipeline_plan.h): an empty model, more stages than layers,
  // a bad schedule, balance or device, dp x pp x tp not the world size.

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

  // One training step: the whole mini-batch's gradients accumulate into
  // parameters() (with dp > 1 averaged over the replicas, each of which
  // computes its 1/dp of the same global batch), and every rank gets the
  // mini-batch's mean loss. `inputs` is read where this rank holds stage 0,
  // `targets` where it holds the last; every rank passes the same batch size
  // and calls step() in the same order. No barrier: a rank returns once its
  // own part is done. Throws baton::Error for a batch that does not split
  // into dp shares of at least microbatches() samples.
  double step(const torch::Tensor& inputs, const torch::Tensor& targets);
  // Several inputs, the first layer's std::vector<torch::Tensor>, each cut
  // along dim 0 unless PipelineOptions::whole_inputs lists it. A middle
  // rank may pass an empty list and an undefined target.
  double step(const std::vector<torch::Tensor>& inputs, const torch::Tensor& targets);

  // Schedules without a flush (docs/library.md, "Asynchronous schedules").
  // 2bw: after step t, parameters()' gradients are step t - 1's (W(t+1) =
  // W(t) - lr * grad(W(t-1))); flush() runs the carried backwards, leaving
  // the last step's gradients, and returns what the drain did.
  runtime::StepResult flush();
  // pipedream, async, pipemare update inside step(), after each micro-batch's
  // backward, with this optimizer (built on parameters(); do not step it
  // yourself). Ignored by other schedules.
  void set_optimizer(torch::optim::Optimizer* optimizer);
  // Whether step() runs the optimizer itself (pipedream, async, pipemare).
  bool updates_inside_step() const;

  // Clips the gradients by their global norm as one device's
  // clip_grad_norm_ would (each parameter once, whatever the layout) and
  // returns the norm before the clip. A collective over the world, between
  // step() and the optimizer. Throws baton::Error for a max_norm not finite
  // and above 0, or a schedule without a flush.
  double clip_grad_norm(double max_norm);

  // Forward only, a collective: the model's output on the rank holding the
  // last stage (under Chimera, each of its two ranks the micro-batches it
  // finished), an undefined tensor on the others.
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
  // Every tensor holding this rank's parameters now, gathering none: the
  // layers' (empty under ZeRO-3 between steps) and ZeRO's shards. Count
  // each storage once.
  std::vector<torch::Tensor> held_parameters() const;
  // This rank's parameters keyed "layer.<global index>.<name>", e.g.
  // "layer.3.weight": the same key whatever the layout (under ZeRO-3
  // gathered first, a dp collective, and whole until the next step).
  std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;

  // Checkpoints (docs/library.md; the format: pipeline/checkpoint.h).
  // save(), a collective and atomic, writes whole layers, `optimizer`'s
  // state (SGD, Adam or AdamW on parameters(); null: none), steps(), the
  // RNG state and `extra` into an empty folder or one of its own saves,
  // keeping `options.keep_last`. load() reads only this rank's files of a
  // save of the same model under any layout into this Pipeline and
  // `optimizer`, sets steps() and returns `extra`. Both throw baton::Error
  // naming the file and what is wrong.
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
  void build(nn::ModelSpec model, runtime::LossFn loss, PipelineOptions options);
  // ZeRO: gather the replicas' stepped shards (a dp collective, once per
  // step); ZeRO-3 frees them again. Logically const.
  void gather_parameters() const;
  void release_parameters() const;

  std::unique_ptr<State> state_;
};

}  // namespace baton
