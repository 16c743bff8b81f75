#include "baton/runtime/stage.h"

#include <torch/autograd.h>

#include "baton/comm/memory_counter.h"
#include "baton/core/error.h"
#include "baton/nn/weight_grad.h"

namespace baton::runtime {

Stage::Stage(const nn::ModelSpec& model, int stage_index, int first_layer, int layer_count,
             uint64_t seed)
    : index_(stage_index),
      first_layer_(first_layer),
      holder_(std::make_shared<torch::nn::Module>()) {
  BATON_CHECK(
      layer_count >= 1 && first_layer >= 0 && first_layer + layer_count <= model.num_layers(),
      "[runtime.stage] stage ", stage_index, " needs layers ", first_layer, "..",
      first_layer + layer_count - 1, " but the model has ", model.num_layers());
  for (int i = first_layer; i < first_layer + layer_count; ++i) {
    torch::nn::AnyModule layer = nn::build_layer(model, i, seed);
    holder_->register_module(std::to_string(i), layer.ptr());
    layers_.push_back(nn::LayerSlot{std::move(layer), i, model.layers[i].name});
  }
}

nn::Tensors Stage::forward(const nn::Tensors& input, double* activation_bytes) {
  nn::Tensors x = input;
  const bool recording = torch::GradMode::is_enabled();
  const nn::LayerSlot* previous = nullptr;
  for (auto& layer : layers_) {
    if (recording && activation_bytes) *activation_bytes += nn::bytes_of(x);
    running_ = &layer;  // stays set when the layer throws
    x = nn::call_layer(layer, x, previous);
    previous = &layer;
  }
  running_ = nullptr;
  return x;
}

std::string Stage::failed_layer() const {
  if (running_ == nullptr) return "";
  const std::string type = running_->module.ptr()->name();  // e.g. torch::nn::LayerNormImpl
  return "layer " + std::to_string(running_->index) + " (\"" + running_->name + "\", " + type + ")";
}

void Stage::set_defer_weight_grad(bool defer, int64_t key) {
  for (auto& child : holder_->modules(/*include_self=*/false)) {
    if (auto* layer = dynamic_cast<nn::DeferredWeightGrad*>(child.get()))
      layer->set_defer_weight_grad(defer, key);
  }
}

int Stage::run_weight_backward(int64_t key) {
  int ran = 0;
  for (auto& child : holder_->modules(/*include_self=*/false)) {
    if (auto* layer = dynamic_cast<nn::DeferredWeightGrad*>(child.get()))
      ran += layer->run_weight_backward(key);
  }
  return ran;
}

}  // namespace baton::runtime

namespace baton::runtime {

std::vector<std::shared_ptr<Stage>> build_stages(const nn::ModelSpec& model,
                                                 const partition::Partition& partition,
                                                 const std::vector<int>& stage_indices,
                                                 uint64_t seed) {
  BATON_CHECK(partition.layers() == model.num_layers(), "[runtime.stage] the partition covers ",
              partition.layers(), " layers but model ", model.name, " has ", model.num_layers());
  comm::MemoryCategoryScope charged(comm::MemoryCategory::kParameters);
  std::vector<std::shared_ptr<Stage>> stages;
  for (int s : stage_indices) {
    stages.push_back(
        std::make_shared<Stage>(model, s, partition.first_layer(s), partition.layers_in(s), seed));
  }
  return stages;
}

}  // namespace baton::runtime
