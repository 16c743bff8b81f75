#include "baton/train/config.h"

#include <toml++/toml.h>

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <thread>

#include "baton/core/error.h"
#include "baton/core/input_file.h"
#include "baton/core/printable.h"
#include "baton/plan/model.h"
#include "baton/schedule/generator.h"
#include "baton/train/toml_characters.h"

namespace baton::train {

std::vector<std::string> resume_change_keys(const TrainConfig& c) {
  std::vector<std::string> keys;
  std::string::size_type begin = 0;
  while (begin <= c.allow_resume_change.size() && !c.allow_resume_change.empty()) {
    const auto end = std::min(c.allow_resume_change.find(',', begin), c.allow_resume_change.size());
    keys.push_back(c.allow_resume_change.substr(begin, end - begin));
    begin = end + 1;
  }
  return keys;
}
namespace {

// `minimum` bounds integer keys from below (their type bounds them above).
template <typename T>
std::function<void(const toml::node&, TrainConfig&)> field(
    T TrainConfig::*member, const char* key,
    int64_t minimum = std::numeric_limits<int64_t>::min()) {
  return [member, key, minimum](const toml::node& node, TrainConfig& config) {
    if constexpr (std::is_same_v<T, std::string>) {
      auto v = node.value<std::string>();
      BATON_CHECK(v.has_value(), "key \"", key, "\" must be a string");
      // An empty name is a mistake (an unset variable), never "not given".
      BATON_CHECK(!v->empty(), "key \"", key,
                  "\" is an empty string; give a value or leave the "
                  "key out");
      config.*member = *v;
    } else if constexpr (std::is_same_v<T, bool>) {
      auto v = node.value<bool>();
      BATON_CHECK(v.has_value(), "key \"", key, "\" must be true or false");
      config.*member = *v;
    } else if constexpr (std::is_floating_point_v<T>) {
      auto v = node.value<double>();
      BATON_CHECK(v.has_value(), "key \"", key, "\" must be a number");
      config.*member = static_cast<T>(*v);
    } else {
      // value<int64_t>() of a float casts it, undefined beyond int64: ask first.
      BATON_CHECK(node.is_integer(), "key \"", key, "\" must be an integer");
      const std::optional<int64_t> v = node.value<int64_t>();
      BATON_CHECK(v.has_value(), "key \"", key, "\" must be an integer");
      // TOML integers are int64: only a narrower type's top needs checking.
      const int64_t low = std::max<int64_t>(minimum, std::numeric_limits<T>::min());
      const int64_t high = std::is_same_v<T, uint64_t>
                               ? std::numeric_limits<int64_t>::max()
                               : static_cast<int64_t>(std::numeric_limits<T>::max());
      BATON_CHECK(*v >= low && *v <= high, "key \"", key, "\" must be an integer in [", low, ", ",
                  high, "], got ", *v);
      config.*member = static_cast<T>(*v);
    }
  };
}

const std::map<std::string, std::function<void(const toml::node&, TrainConfig&)>>& fields() {
  static const std::map<std::string, std::function<void(const toml::node&, TrainConfig&)>> map = {
      {"model", field(&TrainConfig::model, "model")},
      {"layers", field(&TrainConfig::layers, "layers")},
      {"hidden", field(&TrainConfig::hidden, "hidden")},
      {"heads", field(&TrainConfig::heads, "heads")},
      {"context", field(&TrainConfig::context, "context")},
      {"tie_embeddings", field(&TrainConfig::tie_embeddings, "tie_embeddings")},
      {"in_features", field(&TrainConfig::in_features, "in_features")},
      {"classes", field(&TrainConfig::classes, "classes")},
      {"text", field(&TrainConfig::text, "text")},
      {"data", field(&TrainConfig::data, "data")},
      {"data_format", field(&TrainConfig::data_format, "data_format")},
      {"vocab", field(&TrainConfig::vocab, "vocab", 1)},
      {"valid", field(&TrainConfig::valid, "valid")},
      {"eval_every", field(&TrainConfig::eval_every, "eval_every", 1)},
      {"eval_batches", field(&TrainConfig::eval_batches, "eval_batches", 1)},
      {"data_dir", field(&TrainConfig::data_dir, "data_dir")},
      {"cache_dir", field(&TrainConfig::cache_dir, "cache_dir")},
      {"augment", field(&TrainConfig::augment, "augment")},
      {"augment_shift", field(&TrainConfig::augment_shift, "augment_shift", 0)},
      {"pp", field(&TrainConfig::pp, "pp")},
      {"dp", field(&TrainConfig::dp, "dp")},
      {"bucket_mb", field(&TrainConfig::bucket_mb, "bucket_mb")},
      {"overlap_grad_reduce", field(&TrainConfig::overlap_grad_reduce, "overlap_grad_reduce")},
      {"precision", field(&TrainConfig::precision, "precision")},
      {"max_memory_gb",
       [](const toml::node& node, TrainConfig& config) {
         field(&TrainConfig::max_memory_gb, "max_memory_gb")(node, config);
         BATON_CHECK(std::isfinite(config.max_memory_gb) && config.max_memory_gb > 0,
                     "key \"max_memory_gb\" must be a finite number of GB above 0, got ",
                     config.max_memory_gb, " (leave it out for no cap)");
       }},
      {"clip_grad_norm",
       [](const toml::node& node, TrainConfig& config) {
         field(&TrainConfig::clip_grad_norm, "clip_grad_norm")(node, config);
         BATON_CHECK(std::isfinite(config.clip_grad_norm) && config.clip_grad_norm > 0,
                     "key \"clip_grad_norm\" must be a finite norm above 0, got ",
                     config.clip_grad_norm, " (leave it out for no clipping)");
       }},
      {"zero", field(&TrainConfig::zero, "zero")},
      {"tp", field(&TrainConfig::tp, "tp")},
      {"tp_scatter_gather", field(&TrainConfig::tp_scatter_gather, "tp_scatter_gather")},
      {"schedule", field(&TrainConfig::schedule, "schedule")},
      {"virtual", field(&TrainConfig::virtual_stages, "virtual", 1)},
      {"schedule_file", field(&TrainConfig::schedule_file, "schedule_file")},
      {"step_barrier", field(&TrainConfig::step_barrier, "step_barrier")},
      {"microbatches", field(&TrainConfig::microbatches, "microbatches")},
      {"balance", field(&TrainConfig::balance, "balance")},
      {"recompute", field(&TrainConfig::recompute, "recompute")},
      {"pipemare_warmup", field(&TrainConfig::pipemare_warmup, "pipemare_warmup", 0)},
      {"pipemare_correction", field(&TrainConfig::pipemare_correction, "pipemare_correction")},
      {"pipemare_decay", field(&TrainConfig::pipemare_decay, "pipemare_decay")},
      {"checkpoint", field(&TrainConfig::recompute, "checkpoint")},  // deprecated
      {"batch", field(&TrainConfig::batch, "batch")},
      {"steps", field(&TrainConfig::steps, "steps", 1)},
      {"epochs", field(&TrainConfig::epochs, "epochs", 1)},
      {"lr", field(&TrainConfig::lr, "lr")},
      {"lr_schedule", field(&TrainConfig::lr_schedule, "lr_schedule")},
      {"optimizer", field(&TrainConfig::optimizer, "optimizer")},
      {"weight_decay",
       [](const toml::node& node, TrainConfig& config) {
         field(&TrainConfig::weight_decay, "weight_decay")(node, config);
         BATON_CHECK(std::isfinite(config.weight_decay) && config.weight_decay >= 0,
                     "key \"weight_decay\" must be finite and at least 0, got ",
                     config.weight_decay);
       }},
      {"label_smoothing",
       [](const toml::node& node, TrainConfig& config) {
         field(&TrainConfig::label_smoothing, "label_smoothing")(node, config);
         BATON_CHECK(std::isfinite(config.label_smoothing) && config.label_smoothing >= 0 &&
                         config.label_smoothing < 1,
                     "key \"label_smoothing\" must be in [0, 1), got ", config.label_smoothing);
       }},
      {"seed", field(&TrainConfig::seed, "seed")},
      {"threads", field(&TrainConfig::threads, "threads")},
      {"timeout", field(&TrainConfig::timeout_s, "timeout")},
      {"realtime", field(&TrainConfig::realtime, "realtime")},
      {"transport", field(&TrainConfig::transport, "transport")},
      {"device", field(&TrainConfig::device, "device")},
      {"metrics", field(&TrainConfig::metrics, "metrics")},
      {"trace", field(&TrainConfig::trace, "trace")},
      {"svg", field(&TrainConfig::svg, "svg")},
      {"compare_sim", field(&TrainConfig::compare_sim, "compare_sim")},
      {"profile_out", field(&TrainConfig::profile_out, "profile_out")},
      {"log_every", field(&TrainConfig::log_every, "log_every")},
      {"save", field(&TrainConfig::save, "save")},
      {"save_every", field(&TrainConfig::save_every, "save_every", 1)},
      {"resume", field(&TrainConfig::resume, "resume")},
      {"keep_last", field(&TrainConfig::keep_last, "keep_last", 1)},
      {"max_restarts", field(&TrainConfig::max_restarts, "max_restarts", 0)},
      {"allow_resume_change", field(&TrainConfig::allow_resume_change, "allow_resume_change")},
  };
  return map;
}

// A parse error as one line: the file, line, column and toml++'s description.
Error malformed(const std::string& path, const toml::parse_error& e) {
  const auto& where = e.source().begin;
  return Error(detail::concat("[train.config] ", printable(path, 256), ":", where.line, ":",
                              where.column, ": malformed TOML: ", printable(e.description(), 256)));
}

void apply_table(const toml::table& table, const std::string& path, TrainConfig& config,
                 std::vector<std::string>* deprecations) {
  const std::string file = printable(path, 256);
  BATON_CHECK(
      !(table.contains("checkpoint") && table.contains("recompute")), "[train.config] ", file,
      ": keys \"checkpoint\" and \"recompute\" both given; \"checkpoint\" is the deprecated "
      "name of \"recompute\", keep only that");
  if (table.contains("checkpoint") && deprecations) {
    deprecations->push_back(
        detail::concat(file, ": key \"checkpoint\" is deprecated, use \"recompute\""));
  }
  for (const auto& [key, node] : table) {
    const std::string name(key.str());
    const auto it = fields().find(name);
    if (it == fields().end()) {
      std::string known;
      for (const auto& [k, unused] : fields()) known += (known.empty() ? "" : ", ") + k;
      BATON_CHECK(false, "[train.config] ", file, ": unknown key \"", printable(name),
                  "\" (known: ", known, ")");
    }
    try {
      it->second(node, config);
    } catch (const Error& e) {
      throw Error(detail::concat("[train.config] ", file, ": ", e.what()));
    }
  }
}

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void load_toml(const std::string& path, TrainConfig& config,
               std::vector<std::string>* deprecations) {
  load_toml_text(
      read_input_file("[train.config] --config", path, kMaxConfigBytes, "; name a TOML file"), path,
      config, deprecations);
}

void load_toml_text(std::string_view text, const std::string& name, TrainConfig& config,
                    std::vector<std::string>* deprecations) {
  check_toml_characters(text, name);
  toml::table table;
  try {
    table = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    throw malformed(name, e);
  }
  apply_table(table, name, config, deprecations);
}

void check_config(const TrainConfig& c) {
  const char* models[] = {"mlp", "cnn", "gpt", "llama", "resnet"};
  BATON_CHECK(std::find(std::begin(models), std::end(models), c.model) != std::end(models),
              "[train.config] unknown model \"", printable(c.model),
              "\" (expected mlp, cnn, gpt, llama or resnet)");
  const auto& names = schedule::schedule_names();
  if (std::find(names.begin(), names.end(), c.schedule) == names.end()) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    BATON_CHECK(false, "[train.config] unknown schedule \"", printable(c.schedule),
                "\" (known: ", known, ")");
  }
  const char* optimizers[] = {"sgd", "adam", "adamw"};
  BATON_CHECK(
      std::find(std::begin(optimizers), std::end(optimizers), c.optimizer) != std::end(optimizers),
      "[train.config] unknown optimizer \"", printable(c.optimizer),
      "\" (expected sgd, adam or adamw)");
  BATON_CHECK(c.weight_decay == -1 || (std::isfinite(c.weight_decay) && c.weight_decay >= 0),
              "[train.config] weight-decay must be finite and at least 0, got ", c.weight_decay);
  BATON_CHECK(std::isfinite(c.label_smoothing) && c.label_smoothing >= 0 && c.label_smoothing < 1,
              "[train.config] label-smoothing must be in [0, 1), got ", c.label_smoothing);
  BATON_CHECK(c.augment_shift >= 0 && c.augment_shift <= 8,
              "[train.config] augment-shift must be 0 to 8 pixels, got ", c.augment_shift);
  BATON_CHECK(!c.augment || c.model == "cnn" || c.model == "resnet",
              "[train.config] --augment moves and mirrors images; model ", c.model,
              " has no images (use it with cnn or resnet)");
  BATON_CHECK(c.lr_schedule == "constant" || c.lr_schedule == "cosine",
              "[train.config] unknown lr schedule \"", printable(c.lr_schedule),
              "\" (expected constant or cosine)");
  auto positive = [](const char* name, double value) {
    BATON_CHECK(value >= 1, "[train.config] ", name, " must be at least 1, got ", value);
  };
  positive("pp", c.pp);
  positive("dp", c.dp);
  positive("tp", c.tp);
  const bool decoder = c.model == "gpt" || c.model == "llama";
  BATON_CHECK(c.tp == 1 || decoder || c.model == "mlp", "[train.config] --tp ", c.tp,
              " splits the blocks of gpt and llama and the Linear pairs of mlp; model ", c.model,
              " has none (use --tp 1)");
  BATON_CHECK(c.tp == 1 || !decoder || c.heads % c.tp == 0, "[train.config] --tp ", c.tp,
              " must divide --heads ", c.heads,
              " (each tensor-parallel rank computes heads / tp attention heads)");
  BATON_CHECK(c.tp == 1 || c.model != "llama" || plan::llama_ffn_hidden(c.hidden) % c.tp == 0,
              "[train.config] --tp ", c.tp, " must divide llama's SwiGLU width ",
              plan::llama_ffn_hidden(c.hidden), " (for --hidden ", c.hidden, ")");
  BATON_CHECK(c.tp == 1 || c.model != "mlp" || c.hidden % c.tp == 0, "[train.config] --tp ", c.tp,
              " must divide --hidden ", c.hidden,
              " (mlp's column-parallel Linears give each tensor-parallel rank hidden / tp units)");
  BATON_CHECK(c.tp == 1 || !c.compare_sim, "[train.config] --compare-sim with tp=", c.tp,
              " is not supported yet (it compares one pipeline of whole layers); use --tp 1");
  BATON_CHECK(std::isfinite(c.bucket_mb) && c.bucket_mb > 0 && c.bucket_mb <= kMaxBucketMb,
              "[train.config] bucket-mb must be above 0 and at most ", kMaxBucketMb, " MiB, got ",
              c.bucket_mb);
  BATON_CHECK(c.precision == "fp32" || c.precision == "bf16" || c.precision == "fp16",
              "[train.config] unknown precision \"", printable(c.precision),
              "\" (expected fp32, bf16 or fp16)");
  BATON_CHECK(std::isfinite(c.clip_grad_norm) && c.clip_grad_norm >= 0,
              "[train.config] clip-grad-norm must be a finite norm above 0, got ",
              c.clip_grad_norm);
  BATON_CHECK(std::isfinite(c.max_memory_gb) && c.max_memory_gb >= 0,
              "[train.config] max-memory-gb must be a finite number of GB above 0, got ",
              c.max_memory_gb);
  BATON_CHECK(c.max_memory_gb == 0 || (c.tp == 1 && c.device == "cpu"),
              "[train.config] --max-memory-gb caps the activation model's prediction, made on "
              "the CPU without tensor parallelism; leave it out with --tp ",
              c.tp, " --device ", printable(c.device));
  BATON_CHECK(c.pipemare_warmup >= 0,
              "[train.config] pipemare-warmup must be a number of steps, at least 0 (0: no "
              "warm-up), got ",
              c.pipemare_warmup);
  BATON_CHECK(std::isfinite(c.pipemare_decay) && c.pipemare_decay >= 0 && c.pipemare_decay < 1,
              "[train.config] pipemare-decay must be in [0, 1), got ", c.pipemare_decay);
  for (const std::string& key : resume_change_keys(c)) {
    BATON_CHECK(key == "batch" || key == "seed" || key == "lr-schedule" ||
                    key == "clip-grad-norm" || key == "precision" || key == "data",
                "[train.config] allow-resume-change names \"", printable(key),
                "\"; expected a comma-separated list of batch, seed, lr-schedule, "
                "clip-grad-norm, precision, data");
  }
  BATON_CHECK(c.keep_last >= 0,
              "[train.config] keep_last must be at least 1 (the newest save), "
              "got ",
              c.keep_last);
  // Checkpoint flags that would do nothing are mistakes (as --save-every without --save).
  BATON_CHECK(c.keep_last == 0 || !c.save.empty(), "[train.config] --keep-last ", c.keep_last,
              " needs --save DIR: it says how many of --save's checkpoints to keep");
  BATON_CHECK(c.allow_resume_change.empty() || !c.resume.empty() || c.append_metrics,
              "[train.config] --allow-resume-change ", printable(c.allow_resume_change),
              " needs --resume: it says what may differ from the checkpoint a run resumes");
  if (decoder) {
    positive("heads", c.heads);
    positive("context", c.context);
  }
  BATON_CHECK(c.data.empty() || c.text.empty(),
              "[train.config] --data and --text both given; "
              "train on one corpus: --data (tokenized) or --text (bytes)");
  BATON_CHECK(c.data.empty() || decoder,
              "[train.config] --data holds token ids for gpt and "
              "llama; model ",
              c.model, " reads none");
  BATON_CHECK(c.data_format == "megatron" || c.data_format == "flat-uint16" ||
                  c.data_format == "flat-uint32",
              "[train.config] unknown data format \"", printable(c.data_format),
              "\" (expected megatron, flat-uint16 or flat-uint32)");
  BATON_CHECK(c.vocab >= 0, "[train.config] vocab must be at least 1, got ", c.vocab);
  BATON_CHECK(c.vocab == 0 || !c.data.empty(), "[train.config] --vocab ", c.vocab,
              " sizes the vocabulary of --data; without it gpt and llama read bytes (256)");
  BATON_CHECK(c.valid.empty() || !c.data.empty(),
              "[train.config] --valid is a held-out --data corpus; give --data too");
  BATON_CHECK(c.eval_every >= 0 && c.eval_batches >= 1,
              "[train.config] eval_every must be at least 1 and eval_batches at least 1");
  BATON_CHECK(c.eval_every == 0 || !c.valid.empty(), "[train.config] --eval-every ", c.eval_every,
              " evaluates on --valid PREFIX; give it");
  if (c.model == "mlp") {
    positive("in_features", c.in_features);
    positive("classes", c.classes);
  }
  positive("microbatches", c.microbatches);
  positive("batch", c.batch);
  positive("layers", c.layers);
  positive("hidden", c.hidden);
  positive("log_every", c.log_every);
  BATON_CHECK(c.steps >= 0 && c.epochs >= 0, "[train.config] steps and epochs must be >= 0");
  BATON_CHECK(std::isfinite(c.lr) && c.lr > 0,
              "[train.config] lr must be a finite positive number, got ", c.lr);
  // Below 1 ms the timeout rounds to 0, which c10d reads as "its default".
  BATON_CHECK(
      std::isfinite(c.timeout_s) && c.timeout_s >= 0.001 && c.timeout_s <= kMaxTimeoutSeconds,
      "[train.config] timeout must be between 0.001 and ", kMaxTimeoutSeconds,
      " seconds (one week), got ", c.timeout_s);
  BATON_CHECK(c.threads >= 0, "[train.config] threads must be >= 0, got ", c.threads);
  const int cores = available_cores();
  BATON_CHECK(c.threads <= cores, "[train.config] threads must be at most the ", cores,
              " core(s) this process may run on, got ", c.threads);
  BATON_CHECK(c.transport == "auto" || c.transport == "shm" || c.transport == "gloo",
              "[train.config] unknown transport \"", printable(c.transport),
              "\" (expected auto, shm or gloo)");
  BATON_CHECK(c.device == "cpu" || c.device == "cuda", "[train.config] unknown device \"",
              printable(c.device), "\" (expected cpu or cuda)");
  BATON_CHECK(c.save_every >= 0, "[train.config] save_every must be >= 1, got ", c.save_every);
  BATON_CHECK(c.zero == 0 || c.zero == 1,
              "[train.config] zero must be 0 or 1 (ZeRO stage 1 shards the "
              "optimizer state over the dp replicas), got ",
              c.zero);
  BATON_CHECK(c.save_every == 0 || !c.save.empty(), "[train.config] --save-every ", c.save_every,
              " needs --save DIR to say where");
  BATON_CHECK(c.max_restarts >= 0, "[train.config] max_restarts must be at least 0, got ",
              c.max_restarts);
  BATON_CHECK(c.max_restarts == 0 || !c.save.empty(), "[train.config] --max-restarts ",
              c.max_restarts, " needs --save DIR: a restart resumes from its newest checkpoint");
  BATON_CHECK(c.resume != "auto" || !c.save.empty(),
              "[train.config] --resume auto resumes from the newest checkpoint in --save; give "
              "--save DIR");
  BATON_CHECK(c.batch >= c.microbatches, "[train.config] batch of ", c.batch,
              " samples cannot make ", c.microbatches, " micro-batches; use a batch of at least ",
              c.microbatches, " or fewer micro-batches");
  BATON_CHECK(c.batch % c.dp == 0, "[train.config] batch of ", c.batch,
              " samples does not split evenly over dp=", c.dp, " replicas; use a multiple of ",
              c.dp);
  BATON_CHECK(c.batch / c.dp >= c.microbatches, "[train.config] dp=", c.dp, " leaves each replica ",
              c.batch / c.dp, " of the batch's ", c.batch, " samples, fewer than its ",
              c.microbatches, " micro-batches; use a batch of at least ", c.dp * c.microbatches,
              ", a smaller --dp or fewer micro-batches");
}

}  // namespace baton::train
