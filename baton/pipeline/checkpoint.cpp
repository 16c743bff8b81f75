#include "baton/pipeline/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
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

json file_entry(const std::string& path, const char* kind, int layer, const FileRecord& record,
                json tensors) {
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

std::string file_name(const std::string& path) {
  return fs::path(path).filename().string();
}

void write_text(const fs::path& path, const std::string& text) {
  write_atomically(path.string(), std::vector<char>(text.begin(), text.end()));
}

// `path` is, or lies inside, one of `protect`.
bool is_protected(const fs::path& path, const std::vector<std::string>& protect) {
  std::error_code error;
  for (const std::string& p : protect) {
    for (fs::path q = fs::absolute(p, error); !q.empty(); q = q.parent_path()) {
      if (fs::equivalent(q, path, error)) return true;
      if (q == q.parent_path()) break;
    }
  }
  return false;
}

// What saves that did not finish left in `dir` (manifest.h, is_leftover):
// every leftover but the step folders the root manifest keeps and those
// `protect` names. Nothing that is not baton's is removed.
void remove_leftovers(const fs::path& dir, const std::vector<std::string>& protect) {
  std::error_code error;
  std::vector<std::string> kept;
  if (fs::exists(dir / kManifest, error)) kept = kept_folders(read_manifest(dir.string()));
  std::vector<fs::path> doomed;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (std::find(kept.begin(), kept.end(), name) != kept.end()) continue;
    if (is_leftover(dir.string(), name) && !is_protected(entry.path(), protect))
      doomed.push_back(entry.path());
  }
  for (const fs::path& path : doomed) fs::remove_all(path, error);
}

// Rank 0, before any rank writes: the folder is baton's, what killed saves
// left is gone, and the new step's partial folder exists. Returns
// {"folder": the step folder's name}, one that does not exist yet.
json begin_save(const std::string& dir, int64_t step, const std::vector<std::string>& protect) {
  prepare_save_folder("[checkpoint] save into", dir);
  remove_leftovers(dir, protect);
  const std::string plain = step_folder(step);
  std::string folder = plain;
  auto taken = [&](const std::string& name) {
    std::error_code error;
    return fs::exists(fs::symlink_status(fs::path(dir) / name, error)) ||
           fs::exists(fs::symlink_status(fs::path(dir) / (name + kPartialSuffix), error));
  };
  for (int k = 1; taken(folder); ++k) folder = plain + "-" + std::to_string(k);
  const fs::path partial = fs::path(dir) / (folder + kPartialSuffix);
  BATON_CHECK(::mkdir(partial.c_str(), 0755) == 0, "[checkpoint] cannot create folder ",
              partial.string(), ": ", std::strerror(errno));
  return {{"folder", folder}};
}

// Rank 0, once every rank's files are on disk: the partial folder becomes
// the step folder with its step manifest, the root manifest names it first
// among the kept saves, and kept saves beyond r.keep_last go.
void finish_save(const SaveRequest& r, json manifest) {
  const fs::path dir(r.dir);
  const std::string folder = manifest["folder"];
  const fs::path partial = dir / (folder + kPartialSuffix), final_path = dir / folder;
  sync_folder(partial.string());
  BATON_CHECK(std::rename(partial.c_str(), final_path.c_str()) == 0, "[checkpoint] cannot rename ",
              partial.string(), " to ", final_path.string(), ": ", std::strerror(errno));
  sync_folder(r.dir);
  json step = manifest;
  step["folder"] = kStepManifestFolder;
  for (json& f : step["files"]) f["path"] = f["path"].get<std::string>().substr(folder.size() + 1);
  write_text(final_path / kManifest, step.dump(1));

  // The previous root manifest says which folders are baton's (begin_save checked it parses).
  std::vector<std::string> previous;
  std::error_code error;
  if (fs::exists(dir / kManifest, error)) previous = kept_folders(read_manifest(r.dir));
  // A protected folder past keep_last stays listed, so that a later save removes it.
  std::vector<std::string> kept{folder}, dropped;
  for (const std::string& k : previous) {
    if (k == folder || !fs::is_directory(fs::symlink_status(dir / k, error))) continue;
    const bool keep =
        static_cast<int>(kept.size()) < r.keep_last || is_protected(dir / k, r.protect);
    (keep ? kept : dropped).push_back(k);
  }
  manifest["kept"] = kept;
  write_text(dir / kManifest, manifest.dump(1));
  sync_folder(r.dir);
  for (const std::string& k : dropped) fs::remove_all(dir / k, error);
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(std::string(kManifest) + ".tmp.", 0) == 0 && entry.is_regular_file(error)) {
      fs::remove(entry.path(), error);
    }
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

std::string shape_text(const torch::Tensor& t) {
  return describe(t).dump();
}

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
torch::Tensor local_part(const ToLocal& to_local, const std::string& path, int layer,
                         const std::string& name, const torch::Tensor& whole) {
  if (!to_local) return whole;
  try {
    return to_local(layer, name, whole);
  } catch (const Error& e) {
    BATON_CHECK(false, "[checkpoint] file ", path, ": layer ", layer, " \"", name, "\" is ",
                shape_text(whole), ", which this rank cannot take its part of: ", e.what());
  }
}

void restore_layer(const Listed& file, int layer, const NamedTensors& live,
                   const ToLocal& to_local) {
  const std::string& path = file.path;
  std::map<std::string, torch::Tensor> by_name;
  for (const auto& [name, value] : read_tensors(path, file.crc32)) by_name[name] = value;
  NamedTensors parts;
  for (const auto& [name, tensor] : live) {
    auto it = by_name.find(name);
    BATON_CHECK(it != by_name.end(), "[checkpoint] file ", path, ": layer ", layer, " has no \"",
                name, "\" (the model's layer ", layer, " has it; another model?)");
    const torch::Tensor part = local_part(to_local, path, layer, name, it->second);
    BATON_CHECK(
        part.sizes() == tensor.sizes() && part.scalar_type() == tensor.scalar_type(),
        "[checkpoint] file ", path, ": layer ", layer, " \"", name, "\" is ",
        shape_text(it->second), " in the checkpoint",
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
void restore_optimizer(const Listed& file, int layer, const NamedTensors& live,
                       torch::optim::Optimizer& optimizer, const ToLocal& to_local,
                       const ToShard& to_shard) {
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
        key.substr(dot + 1),
        value.dim() == 0 ? value : local_part(to_local, path, layer, parameter, value));
  }
  std::set<const void*> stepped;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& p : group.params()) stepped.insert(p.unsafeGetTensorImpl());
  }
  for (const auto& [name, tensor] : live) {
    auto it = by_parameter.find(name);
    torch::Tensor target = to_shard.stepped ? to_shard.stepped(tensor) : torch::Tensor();
    const bool sharded = target.defined();
    if (!sharded) target = tensor;
    if (stepped.count(target.unsafeGetTensorImpl()) != 0) {
      NamedTensors state = it == by_parameter.end() ? NamedTensors{} : it->second;
      if (sharded) {
        for (auto& [key, value] : state)
          if (value.dim() > 0) value = to_shard.part(tensor, value);
      }
      set_optimizer_state(optimizer, target, state, path, name);
    }
    if (it != by_parameter.end()) by_parameter.erase(it);
  }
  BATON_CHECK(by_parameter.empty(), "[checkpoint] file ", path, ": optimizer state for \"",
              by_parameter.empty() ? "" : by_parameter.begin()->first, "\", which layer ", layer,
              " does not have");
}

}  // namespace

void save(const SaveRequest& r) {
  BATON_CHECK(r.keep_last >= 1, "[checkpoint] keep_last must be at least 1, got ", r.keep_last);
  // Rank 0 checks the folder and makes the new step's partial folder; every
  // rank learns its name, or rank 0's refusal, from one gather.
  json plan = nullptr;
  if (r.comm->rank() == 0) {
    try {
      plan = begin_save(r.dir, r.step, r.protect);
    } catch (const Error& e) {
      plan = {{"error", e.what()}};
    }
  }
  plan = all_gather_json(*r.comm, plan, "the checkpoint folder of step " + std::to_string(r.step))
             .front();
  if (plan.contains("error")) throw Error(plan["error"].get<std::string>());
  const std::string folder = plan["folder"];
  const fs::path partial = fs::path(r.dir) / (folder + kPartialSuffix);

  json files = json::array();
  std::vector<fs::path> written;  // removed again if this rank's part fails
  // Writes one file into the partial folder; the manifest names it in `folder`.
  auto write = [&](const std::string& name, const char* kind, int layer, auto&& writer,
                   json tensors) {
    written.push_back(partial / name);
    const FileRecord record = writer(written.back().string());
    files.push_back(file_entry(folder + "/" + name, kind, layer, record, std::move(tensors)));
    kill_if_asked(r.comm->rank(), r.step, written.back().string());
  };
  try {
    for (const auto& [layer, tensors] : r.layers) {
      const NamedTensors& t = tensors;
      write(
          file_name(layer_file(".", layer)), "layer", layer,
          [&](const std::string& path) { return write_tensors(path, t); }, describe(t));
      if (r.optimizer == nullptr) continue;
      const auto state = r.optimizer_states.find(layer);
      const NamedTensors held = state == r.optimizer_states.end() ? NamedTensors{} : state->second;
      write(
          file_name(optimizer_file(".", layer)), "optimizer", layer,
          [&](const std::string& path) { return write_tensors(path, held); }, describe(held));
    }
    if (r.comm->rank() == 0) {
      const torch::Tensor rng = at::detail::getDefaultCPUGenerator().get_state();
      write(
          file_name(rng_file(".")), "rng", -1,
          [&](const std::string& path) { return write_tensor(path, rng); },
          json{{"", describe(rng)}});
    }
    sync_folder(partial.string());
  } catch (...) {
    std::error_code ignored;
    for (const fs::path& path : written) fs::remove(path, ignored);
    ::rmdir(partial.c_str());  // only when no rank left anything in it
    throw;
  }

  const std::vector<json> all = all_gather_json(*r.comm, files, "the checkpoint's file lists");
  if (r.comm->rank() == 0) {
    json manifest{{"format", "baton-checkpoint"},
                  {"version", kFormatVersion},
                  {"step", r.step},
                  {"folder", folder},
                  {"model", r.model},
                  {"pipeline", r.pipeline},
                  {"optimizer", nullptr},
                  {"extra", r.extra},
                  {"files", json::array()}};
    if (r.optimizer != nullptr) {
      manifest["optimizer"] = {{"kind", optimizer_kind(*r.optimizer)},
                               {"lr", r.optimizer->param_groups().at(0).options().get_lr()}};
    }
    for (const json& part : all) {
      for (const json& f : part) manifest["files"].push_back(f);
    }
    std::sort(manifest["files"].begin(), manifest["files"].end(),
              [](const json& a, const json& b) { return a["path"] < b["path"]; });
    finish_save(r, std::move(manifest));
  }
  // No rank reads or saves again before the manifest is in place.
  r.comm->barrier("the checkpoint manifest of step " + std::to_string(r.step));
}

LoadResult load(const std::string& dir, const Layers& layers, torch::optim::Optimizer* optimizer,
                const json& model, const ToLocal& to_local, const ToShard& to_shard) {
  const json manifest = check(dir);
  const std::string path = (fs::path(dir) / kManifest).string();
  const json& saved = manifest["model"];
  BATON_CHECK(saved.value("name", "") == model.value("name", "") &&
                  saved.value("layers", -1) == model.value("layers", -1),
              "[checkpoint] ", path, " holds ", describe_layers(manifest), " but this is model \"",
              model.value("name", ""), "\" with ", model.value("layers", -1), " layers");
  const json saved_tied = saved.value("tied", json::array());
  const json tied = model.value("tied", json::array());
  BATON_CHECK(saved_tied == tied, "[checkpoint] ", path, " holds a model whose tied weights are ",
              saved_tied.dump(), " but this model ties ", tied.dump(),
              " (a checkpoint saved untied cannot be resumed tied, nor back: the copies differ)");
  if (optimizer != nullptr) {
    const std::string kind = optimizer_kind(*optimizer);
    BATON_CHECK(manifest["optimizer"].is_object(), "[checkpoint] ", path,
                " holds no optimizer state but a ", kind, " optimizer was given to load it into");
    const std::string saved_kind = manifest["optimizer"].value("kind", "");
    BATON_CHECK(saved_kind == kind, "[checkpoint] ", path, " holds the state of a ", saved_kind,
                " optimizer, not of ", kind);
    for (auto& group : optimizer->param_groups())
      group.options().set_lr(manifest["optimizer"].value("lr", 0.0));
  }
  for (const auto& [layer, tensors] : layers) {
    const json* f = find_file(manifest, "layer", layer);
    BATON_CHECK(f != nullptr, "[checkpoint] ", path, " lists no file for layer ", layer,
                " (it holds ", describe_layers(manifest), ")");
    restore_layer(listed(dir, *f), layer, tensors, to_local);
    if (optimizer == nullptr) continue;
    const json* o = find_file(manifest, "optimizer", layer);
    BATON_CHECK(o != nullptr, "[checkpoint] ", path, " lists no optimizer file for layer ", layer);
    restore_optimizer(listed(dir, *o), layer, tensors, *optimizer, to_local, to_shard);
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
      BATON_CHECK(false, "[checkpoint] file ", rng_listed.path,
                  " is not a CPU generator state: ", first_line(e.what_without_backtrace()));
    }
  }
  return LoadResult{manifest["step"].get<int64_t>(),
                    manifest.contains("extra") ? manifest["extra"] : json::object()};
}

}  // namespace baton::checkpoint
