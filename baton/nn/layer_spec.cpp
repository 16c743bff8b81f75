#include "baton/nn/layer_spec.h"

#include "baton/core/error.h"
#include "baton/core/hash.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <cctype>
#include <map>
#include <mutex>
#include <new>
#include <string>

namespace baton::nn {
namespace {

using baton::splitmix64;

// "N bytes" from c10's "... you tried to allocate N bytes ...", else "memory".
std::string requested_bytes(const std::string& message) {
  const std::string marker = "allocate ";
  for (size_t pos = message.find(marker); pos != std::string::npos;
       pos = message.find(marker, pos + 1)) {
    const size_t begin = pos + marker.size();
    size_t end = begin;
    while (end < message.size() && std::isdigit(static_cast<unsigned char>(message[end]))) ++end;
    if (end > begin) return message.substr(begin, end - begin) + " bytes";
  }
  return "memory";
}

std::mutex& build_mutex() {
  static std::mutex mutex;
  return mutex;
}

}  // namespace

uint64_t layer_seed(uint64_t seed, int global_index) {
  return splitmix64(splitmix64(seed) ^ static_cast<uint64_t>(global_index));
}

namespace {

// build_layer() without the tied weights.
torch::nn::AnyModule build_untied(const ModelSpec& spec, int global_index, uint64_t seed) {
  BATON_CHECK(global_index >= 0 && global_index < spec.num_layers(), "[nn.build_layer] model '",
              spec.name, "': layer index ", global_index, " is outside [0, ", spec.num_layers(),
              ")");
  const LayerSpec& layer = spec.layers[static_cast<size_t>(global_index)];
  BATON_CHECK(static_cast<bool>(layer.build), "[nn.build_layer] model '", spec.name, "': layer ",
              global_index, " (", layer.name, ") has no build function");

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
  torch::nn::AnyModule module;
  std::string out_of_memory;  // what could not be allocated, when it failed
  try {
    module = layer.build();
  } catch (const c10::Error& e) {
    const std::string what = e.what_without_backtrace();
    if (what.find("can't allocate memory") == std::string::npos) throw;
    out_of_memory = requested_bytes(what);
  } catch (const std::bad_alloc&) {
    out_of_memory = "memory";
  }
  BATON_CHECK(out_of_memory.empty(), "[nn.build_layer] model '", spec.name, "': layer ",
              global_index, " (", layer.name, ") cannot allocate ", out_of_memory,
              " for its parameters: out of memory");
  BATON_CHECK(!module.is_empty(), "[nn.build_layer] model '", spec.name, "': layer ", global_index,
              " (", layer.name, ") built an empty module");
  return module;
}

// The parameter `name` of `module`; throws naming the model and layer.
torch::Tensor named_parameter(const ModelSpec& spec, const torch::nn::AnyModule& module,
                              const TiedParameter& copy) {
  const auto params = module.ptr()->named_parameters();
  const torch::Tensor* found = params.find(copy.name);
  BATON_CHECK(found != nullptr, "[nn.tied] model '", spec.name, "': layer ", copy.layer,
              " has no parameter \"", copy.name, "\" to tie");
  return *found;
}

}  // namespace

torch::nn::AnyModule build_layer(const ModelSpec& spec, int global_index, uint64_t seed) {
  torch::nn::AnyModule module = build_untied(spec, global_index, seed);
  for (const auto& copies : spec.tied) {
    for (size_t k = 1; k < copies.size(); ++k) {
      if (copies[k].layer != global_index) continue;
      const TiedParameter& first = copies.front();
      BATON_CHECK(first.layer >= 0 && first.layer < spec.num_layers(), "[nn.tied] model '",
                  spec.name, "': a tied weight names layer ", first.layer, " outside [0, ",
                  spec.num_layers(), ")");
      const torch::Tensor source =
          named_parameter(spec, build_untied(spec, first.layer, seed), first);
      torch::Tensor target = named_parameter(spec, module, copies[k]);
      BATON_CHECK(source.sizes() == target.sizes() && source.dtype() == target.dtype(),
                  "[nn.tied] model '", spec.name, "': layer ", first.layer, " ", first.name, " ",
                  source.sizes(), " and layer ", global_index, " ", copies[k].name, " ",
                  target.sizes(), " cannot be tied: their shapes or dtypes differ");
      c10::NoGradGuard no_grad;
      target.copy_(source);
    }
  }
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

std::vector<SkipEdge> skip_edges(const ModelSpec& spec) {
  std::vector<SkipEdge> edges;
  std::map<std::string, size_t> open;  // stashed, not yet popped: index in edges
  auto layer = [&](int i) {
    return detail::concat("layer ", i, " (\"", spec.layers[i].name, "\")");
  };
  for (int i = 0; i < spec.num_layers(); ++i) {
    // A layer pops before it stashes (it may pop a name and stash it anew).
    for (const auto& name : spec.layers[i].skips.pop) {
      auto it = open.find(name);
      BATON_CHECK(it != open.end(), "[nn.skip] model '", spec.name, "': ", layer(i), " pops \"",
                  name, "\", which no earlier layer stashes");
      edges[it->second].to = i;
      open.erase(it);
    }
    for (const auto& name : spec.layers[i].skips.stash) {
      for (const auto& e : edges) {
        BATON_CHECK(e.name != name, "[nn.skip] model '", spec.name, "': ", layer(i), " stashes \"",
                    name, "\", which ", layer(e.from),
                    " stashes already (each name is stashed once)");
      }
      open[name] = edges.size();
      edges.push_back({name, i, -1});
    }
  }
  for (const auto& e : edges) {
    BATON_CHECK(e.to >= 0, "[nn.skip] model '", spec.name, "': ", layer(e.from), " stashes \"",
                e.name, "\", which no later layer pops");
  }
  return edges;
}

std::vector<schedule::Skip> stage_skips(const ModelSpec& spec, const partition::Partition& cut) {
  std::vector<schedule::Skip> skips;
  for (const SkipEdge& e : skip_edges(spec)) {
    const int from = cut.stage_of_layer(e.from), to = cut.stage_of_layer(e.to);
    if (from != to) skips.push_back({e.name, from, to});
  }
  return skips;
}

ModelSpec from_sequential(const torch::nn::Sequential& sequential, std::string name) {
  ModelSpec spec;
  spec.name = std::move(name);
  const auto children = sequential->named_children();
  size_t index = 0;
  for (const torch::nn::AnyModule& child : *sequential) {
    SkipNames skips;
    if (const auto* skippable = dynamic_cast<const Skippable*>(child.ptr().get()))
      skips = skippable->skip_names();
    spec.layers.push_back(LayerSpec{children[index].key(), [child] { return child; }, skips});
    ++index;
  }
  return spec;
}

}  // namespace baton::nn
