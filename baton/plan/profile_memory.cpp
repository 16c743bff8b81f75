#include "baton/plan/profile_memory.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "baton/core/error.h"
#include "baton/partition/balance.h"

namespace baton::plan {

using nlohmann::json;

double profile_number(const json& object, const char* key, const std::string& where,
                      const std::string& path) {
  BATON_CHECK(object.is_object() && object.contains(key) && object[key].is_number(),
              "[plan] --profile ", path, ": ", where, " has no number \"", key,
              "\" (write the profile again with baton train --profile-out)");
  const double value = object[key].get<double>();
  BATON_CHECK(std::isfinite(value) && value >= 0, "[plan] --profile ", path, ": ", where, " \"",
              key, "\" is ", value, "; it must be finite and non-negative");
  return value;
}

namespace {

json layer_json(const sim::LayerMemory& l) {
  return {
      {"graph_bytes", l.graph_bytes},
      {"keeps_input", l.keeps_input},
      {"keeps_output", l.keeps_output},
      {"input_bytes", l.input_bytes},
      {"output_bytes", l.output_bytes},
      {"output_wire_bytes", l.output_wire_bytes},
      {"output_message_bytes", l.output_message_bytes},
      {"output_gradient_message_bytes", l.output_gradient_message_bytes},
      {"forward_extra", l.forward_extra},
      {"backward_extra", l.backward_extra},
      {"backward_peak_bytes", l.backward_peak_bytes},
      {"weight_cast_bytes", l.weight_cast_bytes},
      {"weight_stash_bytes", l.weight_stash_bytes},
      {"weight_stash_output_gradient_bytes", l.weight_stash_output_gradient_bytes},
      {"input_backward_extra", l.input_backward_extra.value_or(l.backward_extra)},
      {"input_backward_peak_bytes", l.input_backward_peak_bytes.value_or(l.backward_peak_bytes)},
      {"cast_gradient_bytes", l.cast_gradient_bytes}};
}

json layers_json(const std::vector<sim::LayerMemory>& layers) {
  json out = json::array();
  for (const sim::LayerMemory& l : layers) out.push_back(layer_json(l));
  return out;
}

bool flag(const json& object, const char* key, const std::string& where, const std::string& path) {
  BATON_CHECK(object.is_object() && object.contains(key) && object[key].is_boolean(),
              "[simulate] --profile ", path, ": ", where, " has no true or false \"", key, "\"");
  return object[key].get<bool>();
}

sim::LayerMemory parse_layer(const json& l, const std::string& where, const std::string& path) {
  sim::LayerMemory out;
  out.graph_bytes = profile_number(l, "graph_bytes", where, path);
  out.keeps_input = flag(l, "keeps_input", where, path);
  out.keeps_output = flag(l, "keeps_output", where, path);
  out.input_bytes = profile_number(l, "input_bytes", where, path);
  out.output_bytes = profile_number(l, "output_bytes", where, path);
  out.output_wire_bytes = profile_number(l, "output_wire_bytes", where, path);
  out.output_message_bytes = profile_number(l, "output_message_bytes", where, path);
  out.output_gradient_message_bytes =
      profile_number(l, "output_gradient_message_bytes", where, path);
  out.forward_extra = profile_number(l, "forward_extra", where, path);
  out.backward_extra = profile_number(l, "backward_extra", where, path);
  out.backward_peak_bytes = profile_number(l, "backward_peak_bytes", where, path);
  out.weight_cast_bytes = profile_number(l, "weight_cast_bytes", where, path);
  out.weight_stash_bytes = profile_number(l, "weight_stash_bytes", where, path);
  out.weight_stash_output_gradient_bytes =
      profile_number(l, "weight_stash_output_gradient_bytes", where, path);
  out.input_backward_extra = profile_number(l, "input_backward_extra", where, path);
  out.input_backward_peak_bytes = profile_number(l, "input_backward_peak_bytes", where, path);
  out.cast_gradient_bytes = profile_number(l, "cast_gradient_bytes", where, path);
  return out;
}

std::vector<sim::LayerMemory> parse_layers(const json& memory, const char* key,
                                           const std::string& path) {
  BATON_CHECK(memory.contains(key) && memory[key].is_array(), "[simulate] --profile ", path,
              ": its \"memory\" has no \"", key, "\" array");
  std::vector<sim::LayerMemory> out;
  for (size_t i = 0; i < memory[key].size(); ++i)
    out.push_back(
        parse_layer(memory[key][i], std::string(key) + "[" + std::to_string(i) + "]", path));
  return out;
}

}  // namespace

json profiled_memory_json(const ProfiledMemory& m) {
  return {{"layers", layers_json(m.model.layers)},
          {"stage_inputs", layers_json(m.model.stage_inputs)},
          {"loss", layer_json(m.model.loss)},
          {"microbatch", m.model.microbatch},
          {"largest_parameter_bytes", m.largest_parameter_bytes},
          {"optimizer_state_per_parameter_byte", m.optimizer_state_per_parameter_byte},
          {"gradients_freed", m.gradients_freed},
          {"sends_copied_up_to", m.sends_copied_up_to},
          {"receives_on_arrival_up_to", m.receives_on_arrival_up_to}};
}

ProfiledMemory parse_profiled_memory(const json& memory, const std::string& path) {
  BATON_CHECK(memory.is_object(), "[simulate] --profile ", path, ": \"memory\" is not an object");
  ProfiledMemory out;
  out.model.layers = parse_layers(memory, "layers", path);
  out.model.stage_inputs = parse_layers(memory, "stage_inputs", path);
  out.model.loss = parse_layer(memory.value("loss", json()), "the loss", path);
  out.model.microbatch = profile_number(memory, "microbatch", "\"memory\"", path);
  BATON_CHECK(memory.contains("largest_parameter_bytes") &&
                  memory["largest_parameter_bytes"].is_array() &&
                  memory["largest_parameter_bytes"].size() == out.model.layers.size(),
              "[simulate] --profile ", path,
              ": \"largest_parameter_bytes\" is not an array of one number per layer (",
              out.model.layers.size(), ")");
  for (size_t i = 0; i < out.model.layers.size(); ++i) {
    const json& b = memory["largest_parameter_bytes"][i];
    BATON_CHECK(b.is_number() && std::isfinite(b.get<double>()) && b.get<double>() >= 0,
                "[simulate] --profile ", path, ": largest_parameter_bytes[", i,
                "] is not a number of at least 0");
    out.largest_parameter_bytes.push_back(b.get<double>());
  }
  out.optimizer_state_per_parameter_byte =
      profile_number(memory, "optimizer_state_per_parameter_byte", "\"memory\"", path);
  out.gradients_freed = flag(memory, "gradients_freed", "\"memory\"", path);
  out.sends_copied_up_to = profile_number(memory, "sends_copied_up_to", "\"memory\"", path);
  if (memory.contains("receives_on_arrival_up_to"))
    out.receives_on_arrival_up_to =
        profile_number(memory, "receives_on_arrival_up_to", "\"memory\"", path);
  return out;
}

std::vector<sim::MemoryPrediction> profiled_rank_memory(
    const ProfiledMemory& memory, const schedule::Schedule& schedule,
    const std::optional<partition::Partition>& given, const std::vector<bool>& recomputed_given,
    Replicas replicas, std::vector<sim::MemoryTrace>* traces) {
  if (traces) traces->clear();
  const int layers = static_cast<int>(memory.model.layers.size());
  BATON_CHECK(schedule.stages <= layers, "[simulate] --profile: ", schedule.name, " has ",
              schedule.stages, " stages but the profiled model has ", layers,
              " layers; every stage needs at least one");
  BATON_ASSERT(memory.parameter_bytes.size() == memory.model.layers.size() &&
                   memory.largest_parameter_bytes.size() == memory.model.layers.size(),
               "profiled memory of ", layers, " layers with ", memory.parameter_bytes.size(),
               " parameter sizes");
  const partition::Partition cut = given ? *given : partition::uniform(layers, schedule.stages);
  BATON_CHECK(cut.layers() == layers && cut.stages() == schedule.stages, "[simulate] the cut ",
              cut.to_string(), " is not ", layers, " layers in ", schedule.stages, " stages");
  std::vector<sim::StageMemory> stages;
  for (int s = 0; s < schedule.stages; ++s)
    stages.push_back(sim::stage_memory(memory.model, cut.first_layer(s), cut.end_layer(s),
                                       s == schedule.stages - 1));
  std::vector<sim::MemoryPrediction> out;
  for (int r = 0; r < schedule.ranks; ++r) {
    std::set<int> held;  // the stages rank r computes
    for (const schedule::Action& a : schedule.actions[r])
      if (a.kind == schedule::ActionKind::F) held.insert(a.stage);
    double whole = 0, largest = 0;
    for (const int s : held) {
      for (int i = cut.first_layer(s); i < cut.end_layer(s); ++i) {
        whole += memory.parameter_bytes[i];
        largest = std::max(largest, memory.largest_parameter_bytes[i]);
      }
    }
    // What the optimizer steps: the stages' parameters, or a replica's shards.
    const bool sharded = replicas.zero > 0 && replicas.dp > 1;
    if (sharded) largest /= replicas.dp;
    sim::StaticMemory fixed =
        sim::replica_static(whole, sharded ? whole / replicas.dp : whole, replicas.zero,
                            replicas.dp, memory.optimizer_state_per_parameter_byte);
    fixed.gradients_freed = memory.gradients_freed;
    fixed.sends_copied_up_to = memory.sends_copied_up_to;
    fixed.receives_on_arrival_up_to = memory.receives_on_arrival_up_to;
    const std::vector<bool> recomputed = recomputed_given.empty()
                                             ? std::vector<bool>(schedule.microbatches, false)
                                             : recomputed_given;
    // Adam's step makes two temporaries the size of the parameter it updates.
    sim::MemoryTrace* trace = nullptr;
    if (traces) trace = &traces->emplace_back();
    out.push_back(sim::predict_rank_memory(
        schedule, r, stages, fixed, recomputed,
        memory.optimizer_state_per_parameter_byte > 0 ? 2 * largest : 0, trace));
  }
  return out;
}

}  // namespace baton::plan
