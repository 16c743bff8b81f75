#include "baton/train/checkpoint_flags.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include "baton/core/error.h"
#include "baton/core/output_files.h"
#include "baton/pipeline/checkpoint.h"
#include "baton/train/options.h"

namespace baton::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// `config`'s values of the options recorded as `kinds` (options.h), by TOML key.
json recorded(const TrainConfig& c, std::initializer_list<Resume> kinds) {
  json out = json::object();
  for (const Option& option : options()) {
    if (std::find(kinds.begin(), kinds.end(), option.resume) == kinds.end()) continue;
    std::visit(
        [&](auto member) {
          using T = std::decay_t<decltype(c.*member)>;
          if constexpr (kIsChoice<T>) {
            out[std::string(option.key)] = std::string(to_string(c.*member));
          } else {
            out[std::string(option.key)] = c.*member;
          }
        },
        option.member);
  }
  // The vocabulary in use, given or not (PREFIX.model's, 256 for bytes).
  if (out.contains("vocab")) out["vocab"] = vocabulary(c);
  return out;
}

// The keys that fix the model's layers and shapes: a checkpoint must agree on all.
json model_keys(const TrainConfig& c) {
  return recorded(c, {Resume::kModel});
}

// A saved config's value of `key`; checkpoints from before tie_embeddings are untied.
json saved_value(const json& saved, const std::string& key) {
  if (saved.contains(key)) return saved[key];
  if (key == "vocab") return json(256);  // before --data: bytes
  return key == "tie_embeddings" ? json(false) : json();
}

// What a checkpoint records of the run (extra.config).
json config_json(const TrainConfig& c) {
  return recorded(c, {Resume::kModel, Resume::kRecorded, Resume::kAllowed});
}

// "--in-features" for "in_features".
std::string flag_of(const std::string& key) {
  std::string flag = "--" + key;
  for (char& ch : flag) ch = ch == '_' ? '-' : ch;
  return flag;
}

// A norm of 0 is no clipping, a value the flag refuses: say so instead.
bool no_clipping(const std::string& flag, const json& value) {
  return flag == "--clip-grad-norm" && value.is_number() && value.get<double>() == 0;
}
// "with --batch 32", or "without clipping".
std::string with_value(const std::string& flag, const json& value) {
  return no_clipping(flag, value) ? "without clipping" : "with " + flag + " " + value.dump();
}
// "--batch 32", or "no clipping".
std::string has_value(const std::string& flag, const json& value) {
  return no_clipping(flag, value) ? "no clipping" : flag + " " + value.dump();
}

void check_resume(const TrainConfig& c) {
  const json manifest = checkpoint::check(c.resume);
  const std::string path = (fs::path(c.resume) / checkpoint::kManifest).string();
  const json saved = manifest.value("extra", json::object()).value("config", json());
  BATON_CHECK(saved.is_object(), "[train] --resume ", c.resume, ": ", path,
              " holds no training configuration (saved by Pipeline::save, not baton train?)");
  const json model = model_keys(c);
  for (const auto& [key, value] : model.items()) {
    const json was = saved_value(saved, key);
    BATON_CHECK(was == value, "[train] --resume ", c.resume, ": ", path, " was saved with ",
                flag_of(key), " ", was.is_null() ? "(none)" : was.dump(), " but this run has ",
                flag_of(key), " ", value.dump(), "; the model must be the same");
  }
  // The run's data and lr schedule: a resume continues the same run unless told otherwise.
  const std::vector<std::string> allowed = resume_change_keys(c);
  const json run = recorded(c, {Resume::kAllowed});
  for (const auto& [key, value] : run.items()) {
    const std::string flag = flag_of(key);
    if (!saved.contains(key) || saved[key] == value ||
        std::find(allowed.begin(), allowed.end(), flag.substr(2)) != allowed.end()) {
      continue;
    }
    BATON_CHECK(false, "[train] --resume ", c.resume, ": ", path, " was saved ",
                with_value(flag, saved[key]), " but this run has ", has_value(flag, value),
                "; pass --allow-resume-change ", flag.substr(2), " to continue with the new value");
  }
  // The corpus: the same dataset (by its identity), unless allowed.
  const json saved_dataset = manifest.value("extra", json::object())
                                 .value("data", json::object())
                                 .value("dataset", json());
  // (Checked once before baton's launcher starts ranks; under torchrun by each rank.)
  const json dataset = c.launcher_checked ? json() : dataset_identity(c);
  if (!saved_dataset.is_null() && !dataset.is_null() &&
      std::find(allowed.begin(), allowed.end(), "data") == allowed.end()) {
    json a = saved_dataset, b = dataset;
    a.erase("path");
    b.erase("path");
    BATON_CHECK(a == b, "[train] --resume ", c.resume, ": ", path, " was saved training on ",
                saved_dataset.value("path", "?"), " (", saved_dataset.value("tokens", 0),
                " tokens, .idx CRC-32 ", saved_dataset.value("index_crc32", 0), ") but --data ",
                c.data, " is another dataset (", dataset.value("tokens", 0),
                " tokens, .idx CRC-32 ", dataset.value("index_crc32", 0),
                "); pass --allow-resume-change data to continue on it");
  }
  BATON_CHECK(saved.value("optimizer", "") == to_string(c.optimizer), "[train] --resume ", c.resume,
              ": ", path, " holds the state of optimizer ", saved.value("optimizer", "?"),
              " but this run has --optimizer ", to_string(c.optimizer));
  const int64_t step = manifest["step"].get<int64_t>();
  BATON_CHECK(c.steps <= 0 || step < c.steps, "[train] --resume ", c.resume, " is at step ", step,
              ", not below --steps ", c.steps, " (the total); raise --steps to train further");
}

// A save folder holding a checkpoint is this run's only when the run
// continues it (--resume names it or one of its steps; --resume auto resolved
// to it): a fresh run must never rotate another run's saves out.
void check_save_folder_is_this_runs(const TrainConfig& c) {
  std::error_code error;
  if (!fs::exists(fs::symlink_status(fs::path(c.save) / checkpoint::kManifest, error))) return;
  if (!c.resume.empty() && path_within(c.resume, c.save)) return;
  const json manifest = checkpoint::read_manifest(c.save);
  const json& model = manifest["model"];
  BATON_CHECK(false, "[train] --save ", c.save, " holds a checkpoint at step ",
              manifest["step"].get<int64_t>(), " (model ", model.value("name", "?"), ", ",
              model.value("layers", -1),
              " layers) that this run does not continue; continue it "
              "with --resume ",
              c.save, " (or --resume auto), or save into an empty or new folder");
}

}  // namespace

void resolve_resume_auto(TrainConfig& c) {
  c.append_metrics = !c.resume.empty();
  if (c.resume != "auto") return;
  c.resume = newest_checkpoint_step(c.save) >= 0 ? c.save : std::string();
}

int64_t newest_checkpoint_step(const std::string& folder) {
  std::error_code error;
  if (!fs::exists(fs::path(folder) / checkpoint::kManifest, error)) return -1;
  return checkpoint::check(folder)["step"].get<int64_t>();
}

void check_checkpoint_flags(const TrainConfig& c) {
  // Resume first: it only reads, and a refused resume should leave no new folder behind.
  if (!c.resume.empty()) check_resume(c);
  if (c.save.empty()) return;
  checkpoint::prepare_save_folder("[train] --save", c.save);
  check_save_folder_is_this_runs(c);
}

SaveOptions save_options(const TrainConfig& c) {
  SaveOptions options;
  options.keep_last = c.keep_last > 0 ? c.keep_last : kDefaultKeepLast;
  if (c.resume.empty()) return options;
  // The step folder a load of --resume read: its root manifest's newest, or itself.
  options.protect.push_back(c.resume);
  const json manifest = checkpoint::read_manifest(c.resume);
  if (!checkpoint::is_step_manifest(manifest)) {
    options.protect.push_back(
        (fs::path(c.resume) / manifest["folder"].get<std::string>()).string());
  }
  return options;
}

int64_t resume_if_asked(const TrainConfig& c, Pipeline& pipeline,
                        torch::optim::Optimizer& optimizer, int64_t total, DataSource& data) {
  if (c.resume.empty()) return 0;
  const json extra = pipeline.load(c.resume, &optimizer);
  const int64_t step = pipeline.steps();
  // --data continues at the saved sample (the same next sample on any layout).
  const json position = extra.value("data", json::object());
  data.resume_at(step, position.value("next_sample", step * int64_t{c.batch}));
  // The data position is the step (batches are a function of seed and step); check it agrees.
  const int64_t next_batch = position.value("next_batch", step);
  BATON_CHECK(next_batch == step, "[train] --resume ", c.resume, ": data position ", next_batch,
              " does not match step ", step);
  BATON_CHECK(step < total, "[train] --resume ", c.resume, " is at step ", step, ", not below the ",
              total, " steps of this run (the total); raise --steps to train further");
  return step;
}

void save_if_due(const TrainConfig& c, const Pipeline& pipeline, torch::optim::Optimizer& optimizer,
                 int64_t done, int64_t total, const SaveOptions& options, const DataSource& data,
                 const json& dataset) {
  if (c.save.empty()) return;
  const bool due = done == total || (c.save_every > 0 && done % c.save_every == 0);
  if (!due) return;
  json position{{"next_batch", done}, {"batch", c.batch}, {"seed", c.seed}};
  const int64_t next_sample = data.sample_of_step(done);
  if (next_sample >= 0) position["next_sample"] = next_sample;
  if (!dataset.is_null()) {
    const int64_t samples_per_epoch = (dataset["tokens"].get<int64_t>() - 1) / c.context;
    position["epoch"] = samples_per_epoch > 0 ? next_sample / samples_per_epoch : 0;
    position["dataset"] = dataset;
  }
  const json extra{{"config", config_json(c)},
                   {"lr_schedule",
                    {{"kind", std::string(to_string(c.lr_schedule))},
                     {"lr", c.lr},
                     {"step", done},
                     {"total_steps", total}}},
                   {"data", position}};
  pipeline.save(c.save, &optimizer, extra, options);
}

}  // namespace baton::train
