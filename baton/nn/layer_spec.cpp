#include "baton/nn/layer_spec.h"

#include "baton/core/error.h"
#include "baton/core/hash.h"

#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

namespace baton::nn {
namespace {

using baton::splitmix64;

std::mutex& build_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

uint64_t layer_seed(uint64_t seed, int global_index) {
  return splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(global_index));
}

torch::nn::AnyModule build_layer(const ModelSpec& spec, int global_index, uint64_t seed) {
  BATON_CHECK(global_index >= 0 && global_index < spec.num_layers(),
              "[nn.build_layer] model '", spec.name, "': layer index ", global_index,
              " is outside [0, ", spec.num_layers(), ")");
  const LayerSpec& layer = spec.layers[static_cast<size_t>(global_index)];
  BATON_CHECK(static_cast<bool>(layer.build), "[nn.build_layer] model '", spec.name,
              "': layer ", global_index, " (", layer.name, ") has no build function");

  std::lock_guard<std::mutex> build_lock(build_mutex());
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  at::Tensor saved_state;
  {
    // The generator's own mutex cannot be held while building: the init ops take it.
    std::lock_guard<std::mutex> lock(generator.mutex());
    saved_state = generator.get_state();
    generator.set_current_seed(layer_seed(seed, global_index));
  }
  struct Restore {
    at::Generator& generator;
    const at::Tensor& state;
    ~Restore() {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(state);
    }
  } restore{generator, saved_state};
  torch::nn::AnyModule module = layer.build();
  BATON_CHECK(!module.is_empty(), "[nn.build_layer] model '", spec.name, "': layer ",
              global_index, " (", layer.name, ") built an empty module");
  return module;
}

torch::nn::Sequential build_sequential(const ModelSpec& spec, uint64_t seed, int begin, int end) {
  if (end < 0) {
    end = spec.num_layers();
  }
  BATON_CHECK(0 <= begin && begin <= end && end <= spec.num_layers(),
              "[nn.build_sequential] model '", spec.name, "': layer range [", begin, ", ", end,
              ") is not inside [0, ", spec.num_layers(), "]");
  torch::nn::Sequential sequential;
  for (int i = begin; i < end; ++i) {
    sequential->push_back(std::to_string(i), build_layer(spec, i, seed));
  }
  return sequential;
}

ModelSpec from_sequential(const torch::nn::Sequential& sequential, std::string name) {
  ModelSpec spec;
  spec.name = std::move(name);
  const auto children = sequential->named_children();
  size_t index = 0;
  for (const torch::nn::AnyModule& child : *sequential) {
    spec.layers.push_back(LayerSpec{children[index].key(), [child] { return child; }});
    ++index;
  }
  return spec;
}

}  // namespace baton::nn
