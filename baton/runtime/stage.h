// A pipeline stage on one rank: a contiguous run of the model's layers,
// built lazily from their specs (so only this rank's layers exist here).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/any.h>
#include <torch/types.h>

#include <memory>
#include <string>
#include <vector>

#include "baton/nn/layer_call.h"
#include "baton/nn/layer_spec.h"

namespace baton::runtime {

class Stage {
 public:
  // Builds layers [first_layer, first_layer + layer_count) of `model` with
  // nn::build_layer, so their weights depend only on (seed, global index).
  Stage(const nn::ModelSpec& model, int stage_index, int first_layer, int layer_count,
        uint64_t seed);

  int index() const { return index_; }
  int first_layer() const { return first_layer_; }
  int layer_count() const { return static_cast<int>(layers_.size()); }

  // Runs the layers in order on the tensors crossing into the stage (one or
  // several: nn/layer_call.h). When autograd records (grad mode on), adds the
  // bytes of every layer's inputs to *activation_bytes: what autograd keeps
  // for the backward, approximately. Throws baton::Error naming the layer when
  // one returns what the next cannot take.
  nn::Tensors forward(const nn::Tensors& input, double* activation_bytes = nullptr);

  // "layer 5 (\"block\")": the layer whose call threw in the last forward, or
  // "" when the last forward finished (a failure in the backward names none).
  std::string failed_layer() const;

  // The module that owns the layers ("3" for global layer 3), for
  // parameters(), named_parameters() and the deferred-weight-gradient walk.
  torch::nn::Module& module() { return *holder_; }
  std::vector<torch::Tensor> parameters() const { return holder_->parameters(); }

  // Weight-gradient deferral (layers with nn::DeferredWeightGrad, such as
  // nn::Linear; nn/weight_grad.h): while on, backward
  // stashes the weight products under `key`; run_weight_backward(key) does them.
  void set_defer_weight_grad(bool defer, int64_t key);
  int run_weight_backward(int64_t key);

 private:
  int index_;
  int first_layer_;
  std::shared_ptr<torch::nn::Module> holder_;
  std::vector<nn::LayerSlot> layers_;
  const nn::LayerSlot* running_ = nullptr;  // the layer forward() is calling
};

}  // namespace baton::runtime

#include "baton/partition/partition.h"

namespace baton::runtime {

// Builds the stages listed in `stage_indices`, stage s taking the layers
// `partition` gives it. REQUIRES: partition.layers() == model.num_layers().
std::vector<std::shared_ptr<Stage>> build_stages(const nn::ModelSpec& model,
                                                 const partition::Partition& partition,
                                                 const std::vector<int>& stage_indices,
                                                 uint64_t seed);

}  // namespace baton::runtime
