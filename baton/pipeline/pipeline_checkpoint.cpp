// Pipeline::save and Pipeline::load: whatever the layout, the files hold
// whole layers and their whole optimizer state, keyed by global layer index
// and parameter name (checkpoint.h). A layer split over tp ranks is gathered
// over its tp group before it is written and cut again on load
// (nn/tensor_split.h); ZeRO optimizer state is put together from the
// replicas' shards for the writer (checkpoint_gather.h), and on load each
// replica restores its shards' part of it.
#include <torch/torch.h>

#include <algorithm>

#include "baton/core/error.h"
#include "baton/nn/tensor_split.h"
#include "baton/pipeline/checkpoint.h"
#include "baton/pipeline/checkpoint_gather.h"
#include "baton/pipeline/optimizer_state.h"
#include "baton/pipeline/pipeline_state.h"

namespace baton {
namespace {

// This rank's layers by global index, each with its parameters and buffers;
// with `writers_only`, only the layers this pipeline rank writes (a
// replicated stage's by the lower of its ranks).
checkpoint::Layers checkpoint_layers(const runtime::Executor& executor,
                                     const schedule::Schedule& schedule, int pipeline_rank,
                                     bool writers_only) {
  const schedule::Placement placement(schedule);
  checkpoint::Layers layers;
  for (const auto& [index, stage] : executor.stages()) {
    const std::vector<int> ranks = placement.ranks_of_stage(index);
    if (writers_only && !ranks.empty() &&
        *std::min_element(ranks.begin(), ranks.end()) != pipeline_rank)
      continue;
    for (int i = 0; i < stage->layer_count(); ++i) layers[stage->first_layer() + i];
    auto add = [&](const std::string& key, const torch::Tensor& tensor) {
      const size_t dot = key.find('.');  // "<global index>.<name inside the layer>"
      layers[std::stoi(key.substr(0, dot))].emplace_back(key.substr(dot + 1), tensor);
    };
    for (const auto& item : stage->module().named_parameters()) add(item.key(), item.value());
    for (const auto& item : stage->module().named_buffers()) add(item.key(), item.value());
  }
  return layers;
}

// How this rank's tensor-parallel parameters are cut, keyed "<global layer>.<name>".
std::map<std::string, nn::TensorSplit> tensor_splits(const runtime::Executor& executor) {
  std::map<std::string, nn::TensorSplit> out;
  for (const auto& [index, stage] : executor.stages()) {
    for (const auto& [key, split] : nn::tensor_parallel_splits(stage->module())) out[key] = split;
  }
  return out;
}

// The manifest's "model": what a checkpoint must agree on to load (its name,
// layer count and ties), and the layers' own names (a Sequential's child
// names, the zoo's "block0"...), which tools/checkpoint_state_dict.py puts
// in front of each layer's keys.
nlohmann::json model_json(const nn::ModelSpec& model) {
  nlohmann::json tied = nlohmann::json::array();
  for (const auto& group : model.tied) {
    nlohmann::json copies = nlohmann::json::array();
    for (const nn::TiedParameter& copy : group)
      copies.push_back({{"layer", copy.layer}, {"name", copy.name}});
    tied.push_back(copies);
  }
  nlohmann::json names = nlohmann::json::array();
  for (const nn::LayerSpec& layer : model.layers) names.push_back(layer.name);
  return {
      {"name", model.name}, {"layers", model.num_layers()}, {"tied", tied}, {"layer_names", names}};
}

std::string split_key(int layer, const std::string& name) {
  return std::to_string(layer) + "." + name;
}

// `optimizer`'s state of each parameter of `layers` ({state: tensor}), one
// entry per tensor of `layers` in order (buffers have none). Under ZeRO
// (`zero`), `dp_group` puts each parameter's state together from the
// replicas' shards (a collective; every replica lists the same layers).
std::vector<checkpoint::NamedTensors> optimizer_states(const checkpoint::Layers& layers,
                                                       torch::optim::Optimizer& optimizer,
                                                       const runtime::ZeroShards* zero,
                                                       comm::Communicator& dp_group, int64_t step) {
  std::vector<checkpoint::NamedTensors> out;
  std::vector<checkpoint::ShardSpan> spans;
  for (const auto& [layer, tensors] : layers) {
    for (const auto& [name, tensor] : tensors) {
      const torch::Tensor shard = zero != nullptr ? zero->shard_of(tensor) : torch::Tensor();
      out.push_back(checkpoint::optimizer_state_of(optimizer, shard.defined() ? shard : tensor));
      if (zero == nullptr) continue;
      const runtime::ZeroShards::Place place = zero->place_of(tensor);
      spans.push_back({place.sizes, place.begin, place.length});
    }
  }
  if (zero == nullptr) return out;
  return checkpoint::gather_shards(
      dp_group, out, spans,
      detail::concat("the step ", step, " checkpoint's ZeRO-", zero->zero(), " optimizer state"));
}

// The optimizer files' contents: per layer, "<parameter>.<state>" tensors.
std::map<int, checkpoint::NamedTensors> by_layer(
    const checkpoint::Layers& layers, const std::vector<checkpoint::NamedTensors>& states) {
  std::map<int, checkpoint::NamedTensors> out;
  size_t k = 0;
  for (const auto& [layer, tensors] : layers) {
    checkpoint::NamedTensors& file = out[layer];
    for (const auto& [name, tensor] : tensors) {
      for (const auto& [key, value] : states.at(k)) file.emplace_back(name + "." + key, value);
      ++k;
    }
  }
  return out;
}

// Replaces every tensor-parallel slice in `layers` and `states` (optimizer
// state is cut as its parameter is) with the whole tensor, gathered over
// `tp_group` (a collective: every tp rank of the stage lists the same).
void gather_whole(checkpoint::Layers& layers, std::map<int, checkpoint::NamedTensors>& states,
                  const std::map<std::string, nn::TensorSplit>& splits,
                  comm::Communicator& tp_group, int64_t step) {
  std::vector<torch::Tensor*> targets;
  std::vector<torch::Tensor> slices;
  std::vector<nn::TensorSplit> how;
  auto visit = [&](int layer, const std::string& parameter, torch::Tensor& tensor) {
    const auto it = splits.find(split_key(layer, parameter));
    if (it == splits.end() || tensor.dim() == 0) return;  // whole already (or Adam's step)
    targets.push_back(&tensor);
    slices.push_back(tensor);
    how.push_back(it->second);
  };
  for (auto& [layer, tensors] : layers) {
    for (auto& [name, tensor] : tensors) visit(layer, name, tensor);
  }
  for (auto& [layer, state] : states) {
    for (auto& [key, tensor] : state) visit(layer, key.substr(0, key.rfind('.')), tensor);
  }
  const std::vector<torch::Tensor> whole =
      nn::gather_slices(slices, how, tp_group,
                        detail::concat("the step ", step, " checkpoint's tensor-parallel layers"));
  for (size_t i = 0; i < targets.size(); ++i) *targets[i] = whole[i];
}

}  // namespace

void Pipeline::save(const std::string& dir, torch::optim::Optimizer* optimizer,
                    const nlohmann::json& extra, const SaveOptions& options) const {
  State& s = *state_;
  BATON_CHECK(!s.schedule.carries, "[pipeline] save with schedule ", s.schedule.name,
              ": its weights are double-buffered with backwards carried between steps, which "
              "checkpoints do not hold yet; save a run with a flush (e.g. 1f1b)");
  gather_parameters();
  // Every replica and tp rank of a pipeline rank lists the same layers (the
  // collectives below match), and replica 0's tp rank 0 writes them.
  const comm::RankLayout& where = s.layout;
  checkpoint::Layers layers =
      checkpoint_layers(*s.executor, s.schedule, where.pipeline_rank(), /*writers_only=*/true);
  std::map<int, checkpoint::NamedTensors> states;
  if (optimizer != nullptr) {
    checkpoint::optimizer_kind(*optimizer);  // refuses an unsupported one before any collective
    states = by_layer(layers,
                      optimizer_states(layers, *optimizer, s.executor->zero(), *where.dp, s.steps));
  }
  if (where.here.dp == 0 && where.grid.tp() > 1)
    gather_whole(layers, states, tensor_splits(*s.executor), *where.tp, s.steps);
  checkpoint::SaveRequest request;
  request.dir = dir;
  request.step = s.steps;
  request.comm = where.world;
  if (where.here.dp == 0 && where.here.tp == 0) {
    request.layers = std::move(layers);
    request.optimizer_states = std::move(states);
  }
  request.optimizer = optimizer;
  request.model = model_json(s.model);
  request.keep_last = options.keep_last;
  request.protect = options.protect;
  request.pipeline = {
      {"pp", where.grid.pp()},
      {"dp", where.grid.dp()},
      {"tp", where.grid.tp()},
      {"zero", s.executor->zero() != nullptr ? s.options.zero() : 0},
      {"schedule", s.options.schedule_file().empty() ? s.options.schedule()
                                                     : "file " + s.options.schedule_file()},
      {"microbatches", s.options.microbatches()},
      {"stages", s.schedule.stages},
      {"balance", s.options.balance()},
      {"partition", s.partition.to_string()},
      {"seed", s.options.seed()}};
  request.extra = extra;
  checkpoint::save(request);
  release_parameters();
}

nlohmann::json Pipeline::load(const std::string& dir, torch::optim::Optimizer* optimizer) {
  State& s = *state_;
  BATON_CHECK(!s.schedule.carries, "[pipeline] load with schedule ", s.schedule.name,
              ": its weights are double-buffered with backwards carried between steps, which "
              "checkpoints do not hold yet; resume with a flushed schedule (e.g. 1f1b)");
  checkpoint::ToLocal to_local;
  if (s.layout.grid.tp() > 1) {
    to_local = [splits = tensor_splits(*s.executor), rank = s.layout.here.tp,
                size = s.layout.grid.tp()](int layer, const std::string& name,
                                           const torch::Tensor& whole) {
      const auto it = splits.find(split_key(layer, name));
      return it == splits.end() ? whole : nn::take_slice(whole, it->second, rank, size);
    };
  }
  // Under ZeRO the optimizer steps this replica's shards: load() restores their part.
  runtime::ZeroShards* zero = s.executor->zero();
  checkpoint::ToShard to_shard;
  if (zero != nullptr) {
    gather_parameters();  // ZeRO-3: the weights whole, for the layers' files to land in
    to_shard.stepped = [zero](const torch::Tensor& p) { return zero->shard_of(p); };
    to_shard.part = [zero](const torch::Tensor& p, const torch::Tensor& state) {
      const runtime::ZeroShards::Place place = zero->place_of(p);
      return state.reshape({-1}).narrow(0, place.begin, place.length).clone();
    };
  }
  const checkpoint::LoadResult result = checkpoint::load(
      dir,
      checkpoint_layers(*s.executor, s.schedule, s.layout.pipeline_rank(), /*writers_only=*/false),
      optimizer, model_json(s.model), to_local, to_shard);
  s.steps = result.step;
  s.executor->set_steps_run(result.step);
  if (zero != nullptr) {
    zero->refresh_shards();
    // Every replica loaded every parameter: nothing to gather before the next step.
    s.gathered_at = s.steps;
    release_parameters();
  }
  return result.extra;
}

}  // namespace baton
