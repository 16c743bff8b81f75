#include "baton/pipeline/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "baton/core/error.h"
#include "baton/pipeline/checkpoint_gather.h"
#include "baton/pipeline/optimizer_state.h"

namespace baton::checkpoint {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string step_folder(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return name;
}

// The manifest now in `dir`, or null when there is none that parses.
json current_manifest(const std::string& dir) {
  std::ifstream in(fs::path(dir) / kManifest);
  if (!in.good()) return nullptr;
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// step_<N>, unless the manifest in place names it: then step_<N>-1.
std::string choose_folder(const std::string& dir, int64_t step) {
  const json current = current_manifest(dir);
  const std::string plain = step_folder(step);
  if (current.is_object() && current.value("folder", "") == plain) return plain + "-1";
  return plain;
}

json file_entry(const std::string& path, const char* kind, int layer, const FileRecord& record, json tensors) {
  json entry{{"path", path},
             {"kind", kind},
             {"bytes", record.bytes},
             {"crc32", crc32_text(record.crc32)},
             {"tensors", std::move(tensors)}};
  if (layer >= 0) entry["layer"] = layer;
  return entry;
}

void sync_folder(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// After the new manifest landed: older step folders, and files of this one
// that it does not name (what an interrupted save of the same folder left).
void remove_stale(const std::string& dir, const json& manifest) {
  const std::string folder = manifest["folder"];
  std::set<std::string> listed;
  for (const auto& f : manifest["files"]) listed.insert(f["path"].get<std::string>());
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) == 0 && name != folder && entry.is_directory(error)) {
      fs::remove_all(entry.path(), error);
    } else if (name.rfind(std::string(kManifest) + ".tmp.", 0) == 0) {
      fs::remove(entry.path(), error);
    }
  }
  for (const auto& entry : fs::directory_iterator(fs::path(dir) / folder, error)) {
    const std::string path = folder + "/" + entry.path().filename().string();
    if (listed.count(path) == 0) fs::remove(entry.path(), error);
  }
}

std::string describe_layers(const json& manifest) {
  return detail::concat("model \"", manifest["model"].value("name", "?"), "\" with ",
                        manifest["model"].value("layers", -1), " layers");
}

const json* find_file(const json& manifest, const char* kind, int layer) {
  for (const auto& f : manifest["files"]) {
    if (f.value("kind", "") == kind && f.value("layer", -1) == layer) return &f;
  }
  return nullptr;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

std::string shape_text(const torch::Tensor& t) { return describe(t).dump(); }

// A file the manifest lists: its path under `dir` and its recorded CRC-32
// (check() has validated the field).
struct Listed {
  std::string path;
  uint32_t crc32 = 0;
};

Listed listed(const std::string& dir, const json& entry) {
  Listed out{(fs::path(dir) / entry["path"].get<std::string>()).string()};
  parse_crc32(entry["crc32"].get<std::string>(), &out.crc32);
  return out;
}

// `whole` as this rank holds it (to_local's part, or itself), for `name` of `layer` in `path`.
torch::Tensor local_part(const ToLocal& to_local, const std::string& path, int layer, const std::string& name,
                         const torch::Tensor& whole) {
  if (!to_local) return whole;
  try {
    return to_local(layer, name, whole);
  } catch (const Error& e) {
    BATON_CHECK(false, "[checkpoint] file ", path, ": layer ", layer, " \"", name, "\" is ", shape_text(whole),
                ", which this rank cannot take its part of: ", e.what());
  }
}

void restore_layer(const Listed& file, int layer, const NamedTensors& live, const ToLocal& to_local) {
  const std::string& path = file.path;
  std::map<std::string, torch::Tensor> by_name;
  for (const auto& [name, value] : read_tensors(path, file.crc32)) by_name[name] = value;
  NamedTensors parts;
  for (const auto& [name, tensor] : live) {
    auto it = by_name.find(name);
    BATON_CHECK(it != by_name.end(), "[checkpoint] file ", path, ": layer ", layer, " has no \"", name,
                "\" (the model's layer ", layer, " has it; another model?)");
    const torch::Tensor part = local_part(to_local, path, layer, name, it->second);
    BATON_CHECK(part.sizes() == tensor.sizes() && part.scalar_type() == tensor.scalar_type(),
                "[checkpoint] file ", path, ": layer ", layer, " \"", name, "\" is ", shape_text(it->second),
                " in the checkpoint",
                part.sizes() == it->second.sizes() ? "" : " (" + shape_text(part) + " on this rank)",
                " but ", shape_text(tensor), " in the model");
    parts.emplace_back(name, part);
    by_name.erase(it);
  }
  BATON_CHECK(by_name.empty(), "[checkpoint] file ", path, ": layer ", layer, " has \"",
              by_name.empty() ? "" : by_name.begin()->first, "\", which the model's layer ", layer,
              " does not have (another model?)");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < live.size(); ++i) live[i].second.copy_(parts[i].second);
}

// Restores the state of the parameters of `live` that `optimizer` steps.
void restore_optimizer(const Listed& file, int layer, const NamedTensors& live, torch::optim::Optimizer& optimizer,
                       const ToLocal& to_local) {
  const std::string& path = file.path;
  const NamedTensors saved = read_tensors(path, file.crc32);
  std::map<std::string, NamedTensors> by_parameter;
  for (const auto& [key, value] : saved) {
    const size_t dot = key.rfind('.');
    BATON_CHECK(dot != std::string::npos, "[checkpoint] file ", path, ": entry \"", key,
                "\" is not <parameter>.<state>");
    const std::string parameter = key.substr(0, dot);
    // A scalar (Adam's step) is the same on every rank.
    by_parameter[parameter].emplace_back(
        key.substr(dot + 1), value.dim() == 0 ? value : local_part(to_local, path, layer, parameter, value));
  }
  std::set<const void*> stepped;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) stepped.insert(p.unsafeGetTensorImpl());
  }
  for (const auto& [name, tensor] : live) {
    auto it = by_parameter.find(name);
    if (stepped.count(tensor.unsafeGetTensorImpl()) != 0) {
      set_optimizer_state(optimizer, tensor, it == by_parameter.end() ? NamedTensors{} : it->second, path, name);
    }
    if (it != by_parameter.end()) by_parameter.erase(it);
  }
  BATON_CHECK(by_parameter.empty(), "[checkpoint] file ", path, ": optimizer state for \"",
              by_parameter.empty() ? "" : by_parameter.begin()->first, "\", which layer ", layer,
              " does not have");
}

}  // namespace

void save(const SaveRequest& r) {
  std::error_code error;
  fs::create_directories(r.dir, error);
  BATON_CHECK(fs::is_directory(r.dir), "[checkpoint] cannot create folder ", r.dir, ": ",
              error ? error.message() : "it is not a folder");
  const std::string folder = choose_folder(r.dir, r.step);
  fs::create_directories(fs::path(r.dir) / folder, error);
  BATON_CHECK(fs::is_directory(fs::path(r.dir) / folder), "[checkpoint] cannot create folder ",
              (fs::path(r.dir) / folder).string(), ": ", error.message());

  json files = json::array();
  auto write = [&](const std::string& relative, const char* kind, int layer, const NamedTensors& tensors) {
    const std::string path = (fs::path(r.dir) / relative).string();
    files.push_back(file_entry(relative, kind, layer, write_tensors(path, tensors), describe(tensors)));
    kill_if_asked(r.rank, r.step, path);
  };
  for (const auto& [layer, tensors] : r.layers) {
    write(layer_file(folder, layer), "layer", layer, tensors);
    if (r.optimizer == nullptr) continue;
    const auto state = r.optimizer_states.find(layer);
    write(optimizer_file(folder, layer), "optimizer", layer,
          state == r.optimizer_states.end() ? NamedTensors{} : state->second);
  }
  if (r.rank == 0) {
    const std::string relative = rng_file(folder);
    const torch::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
    files.push_back(file_entry(relative, "rng", -1,
                               write_tensor((fs::path(r.dir) / relative).string(), rng),
                               json{{"", describe(rng)}}));
  }
  sync_folder((fs::path(r.dir) / folder).string());

  const std::vector<json> all = all_gather_json(r.comm, files, "the checkpoint's file lists");
  if (r.rank == 0) {
    json manifest{{"format", "baton-checkpoint"}, {"version", kFormatVersion}, {"step", r.step},
                  {"folder", folder},             {"model", r.model},         {"pipeline", r.pipeline},
                  {"optimizer", nullptr},         {"extra", r.extra},         {"files", json::array()}};
    if (r.optimizer != nullptr) {
      manifest["optimizer"] = {{"kind", optimizer_kind(*r.optimizer)},
                               {"lr", r.optimizer->param_groups().at(0).options().get_lr()}};
    }
    for (const json& part : all) {
      for (const json& f : part) manifest["files"].push_back(f);
    }
    std::sort(manifest["files"].begin(), manifest["files"].end(),
              [](const json& a, const json& b) { return a["path"] < b["path"]; });
    const std::string text = manifest.dump(1);
    write_atomically((fs::path(r.dir) / kManifest).string(), std::vector<char>(text.begin(), text.end()));
    sync_folder(r.dir);
    remove_stale(r.dir, manifest);
  }
  // No rank reads or saves again before the manifest is in place.
  if (r.comm != nullptr) r.comm->barrier("the checkpoint manifest of step " + std::to_string(r.step));
}

json check(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifest).string();
  std::error_code error;
  BATON_CHECK(fs::exists(dir, error), "[checkpoint] folder ", dir, " does not exist: no checkpoint there");
  BATON_CHECK(fs::is_directory(dir, error), "[checkpoint] ", dir, " is a file, not a checkpoint's folder");
  std::ifstream in(path);
  BATON_CHECK(in.good(), "[checkpoint] ", path, " is missing: ", dir,
              " holds no checkpoint (or its first save never finished)");
  json manifest;
  try {
    manifest = json::parse(in);
  } catch (const json::exception& e) {
    BATON_CHECK(false, "[checkpoint] ", path, " is not valid JSON (truncated?): ", e.what());
  }
  BATON_CHECK(manifest.is_object() && manifest.value("format", "") == "baton-checkpoint", "[checkpoint] ",
              path, " is not a baton checkpoint manifest (no \"format\": \"baton-checkpoint\")");
  BATON_CHECK(manifest.value("version", -1) == kFormatVersion, "[checkpoint] ", path, " has version ",
              manifest.value("version", -1), "; this baton reads version ", kFormatVersion);
  try {
    for (const char* key : {"step", "folder", "model", "files"}) {
      BATON_CHECK(manifest.contains(key), "[checkpoint] ", path, " lacks \"", key, "\"");
    }
    manifest["step"].get<int64_t>();
    manifest["model"]["layers"].get<int>();
    for (const auto& f : manifest["files"]) {
      const std::string file = (fs::path(dir) / f["path"].get<std::string>()).string();
      const int64_t bytes = f["bytes"].get<int64_t>();
      BATON_CHECK(fs::is_regular_file(file, error), "[checkpoint] file ", file, " is missing (", path,
                  " lists it)");
      const auto size = static_cast<int64_t>(fs::file_size(file, error));
      BATON_CHECK(size == bytes, "[checkpoint] file ", file, " has ", size, " bytes but ", path,
                  " says ", bytes, " (truncated or replaced)");
      uint32_t crc = 0;
      BATON_CHECK(f.contains("crc32") && parse_crc32(f["crc32"].get<std::string>(), &crc), "[checkpoint] ",
                  path, " gives file ", file, " no \"crc32\" of 8 lower-case hex digits");
    }
  } catch (const json::exception& e) {
    BATON_CHECK(false, "[checkpoint] ", path, " is malformed: ", e.what());
  }
  return manifest;
}

LoadResult load(const std::string& dir, const Layers& layers, torch::optim::Optimizer* optimizer,
                const json& model, const ToLocal& to_local) {
  const json manifest = check(dir);
  const std::string path = (fs::path(dir) / kManifest).string();
  const json& saved = manifest["model"];
  BATON_CHECK(saved.value("name", "") == model.value("name", "") &&
                  saved.value("layers", -1) == model.value("layers", -1),
              "[checkpoint] ", path, " holds ", describe_layers(manifest), " but this is model \"",
              model.value("name", ""), "\" with ", model.value("layers", -1), " layers");
  if (optimizer != nullptr) {
    const std::string kind = optimizer_kind(*optimizer);
    BATON_CHECK(manifest["optimizer"].is_object(), "[checkpoint] ", path,
                " holds no optimizer state but a ", kind, " optimizer was given to load it into");
    const std::string saved_kind = manifest["optimizer"].value("kind", "");
    BATON_CHECK(saved_kind == kind, "[checkpoint] ", path, " holds the state of a ", saved_kind,
                " optimizer, not of ", kind);
    for (auto& group : optimizer->param_groups()) group.options().set_lr(manifest["optimizer"].value("lr", 0.0));
  }
  for (const auto& [layer, tensors] : layers) {
    const json* f = find_file(manifest, "layer", layer);
    BATON_CHECK(f != nullptr, "[checkpoint] ", path, " lists no file for layer ", layer, " (it holds ",
                describe_layers(manifest), ")");
    restore_layer(listed(dir, *f), layer, tensors, to_local);
    if (optimizer == nullptr) continue;
    const json* o = find_file(manifest, "optimizer", layer);
    BATON_CHECK(o != nullptr, "[checkpoint] ", path, " lists no optimizer file for layer ", layer);
    restore_optimizer(listed(dir, *o), layer, tensors, *optimizer, to_local);
  }
  const json* rng = find_file(manifest, "rng", -1);
  BATON_CHECK(rng != nullptr, "[checkpoint] ", path, " lists no rng file");
  const Listed rng_listed = listed(dir, *rng);
  const torch::Tensor state = read_tensor(rng_listed.path, rng_listed.crc32);
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    try {
      generator.set_state(state);
    } catch (const c10::Error& e) {
      BATON_CHECK(false, "[checkpoint] file ", rng_listed.path, " is not a CPU generator state: ", first_line(e.what_without_backtrace()));
    }
  }
  return LoadResult{manifest["step"].get<int64_t>(),
                    manifest.contains("extra") ? manifest["extra"] : json::object()};
}

}  // namespace baton::checkpoint
