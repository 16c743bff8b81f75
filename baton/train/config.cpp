#include "baton/train/config.h"

#include <toml++/toml.h>

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

#include "baton/core/choices.h"
#include "baton/core/error.h"
#include "baton/core/input_file.h"
#include "baton/core/model_shapes.h"
#include "baton/core/printable.h"
#include "baton/schedule/generator.h"
#include "baton/train/options.h"
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

// Reads `node` into `option`'s member: the TOML type, then the option's check.
void read_key(const Option& option, const std::string& key, const toml::node& node,
              TrainConfig& config) {
  const bool bounded = option.check == Check::kCount || option.check == Check::kRange;
  std::visit(
      [&](auto member) {
        using T = std::decay_t<decltype(config.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          auto v = node.value<std::string>();
          BATON_CHECK(v.has_value(), "key \"", key, "\" must be a string");
          // An empty name is a mistake (an unset variable), never "not given".
          BATON_CHECK(!v->empty(), "key \"", key,
                      "\" is an empty string; give a value or leave the "
                      "key out");
          config.*member = *v;
        } else if constexpr (kIsChoice<T>) {
          auto v = node.value<std::string>();
          BATON_CHECK(v.has_value(), "key \"", key, "\" must be a string");
          try {
            parse_choice(option, *v, config);
          } catch (const Error& e) {
            throw Error(detail::concat("key \"", key, "\": ", e.what()));
          }
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
          const int64_t low =
              std::max<int64_t>(bounded ? option.low : std::numeric_limits<int64_t>::min(),
                                std::numeric_limits<T>::min());
          int64_t high = std::is_same_v<T, uint64_t>
                             ? std::numeric_limits<int64_t>::max()
                             : static_cast<int64_t>(std::numeric_limits<T>::max());
          if (option.check == Check::kRange) high = option.high;
          BATON_CHECK(*v >= low && *v <= high, "key \"", key, "\" must be an integer in [", low,
                      ", ", high, "], got ", *v);
          config.*member = static_cast<T>(*v);
        }
      },
      option.member);
  // A name's choices are check_config's to refuse ("unknown model ...").
  if (std::holds_alternative<std::string TrainConfig::*>(option.member)) return;
  const std::string problem = option_problem(option, config);
  BATON_CHECK(problem.empty(), "key \"", key, "\" ", problem);
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
    // "checkpoint": the deprecated name of "recompute".
    const Option* option = option_by_key(name == "checkpoint" ? "recompute" : name);
    if (option == nullptr) {
      std::set<std::string> keys{"checkpoint"};
      for (const Option& o : options()) keys.emplace(o.key);
      std::string known;
      for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
      BATON_CHECK(false, "[train.config] ", file, ": unknown key \"", printable(name),
                  "\" (known: ", known, ")");
    }
    try {
      read_key(*option, name, node, config);
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

namespace {

void check_at_least_one(const char* name, double value) {
  BATON_CHECK(value >= 1, "[train.config] ", name, " must be at least 1, got ", value);
}

bool is_decoder(const TrainConfig& c) {
  return c.model == "gpt" || c.model == "llama";
}

// Each option's own check and choices (options.h).
void check_each_option(const TrainConfig& c) {
  for (const Option& option : options()) {
    if (at_default(option, c)) continue;
    const std::string problem = option_problem(option, c);
    if (problem.empty()) continue;
    const bool name = std::holds_alternative<std::string TrainConfig::*>(option.member);
    BATON_CHECK(false, "[train.config] ", name ? "" : option.flag.substr(2), name ? "" : " ",
                problem);
  }
}

// The grid against the model, the device and the buckets.
void check_layout(const TrainConfig& c) {
  BATON_CHECK(!c.augment || c.model == "cnn" || c.model == "resnet",
              "[train.config] --augment moves and mirrors images; model ", c.model,
              " has no images (use it with cnn or resnet)");
  check_at_least_one("pp", c.pp);
  check_at_least_one("dp", c.dp);
  check_at_least_one("tp", c.tp);
  const bool decoder = is_decoder(c);
  BATON_CHECK(c.tp == 1 || decoder || c.model == "mlp", "[train.config] --tp ", c.tp,
              " splits the blocks of gpt and llama and the Linear pairs of mlp; model ", c.model,
              " has none (use --tp 1)");
  BATON_CHECK(c.tp == 1 || !decoder || c.heads % c.tp == 0, "[train.config] --tp ", c.tp,
              " must divide --heads ", c.heads,
              " (each tensor-parallel rank computes heads / tp attention heads)");
  BATON_CHECK(c.tp == 1 || c.model != "llama" || llama_ffn_hidden(c.hidden) % c.tp == 0,
              "[train.config] --tp ", c.tp, " must divide llama's SwiGLU width ",
              llama_ffn_hidden(c.hidden), " (for --hidden ", c.hidden, ")");
  BATON_CHECK(c.tp == 1 || c.model != "mlp" || c.hidden % c.tp == 0, "[train.config] --tp ", c.tp,
              " must divide --hidden ", c.hidden,
              " (mlp's column-parallel Linears give each tensor-parallel rank hidden / tp units)");
  BATON_CHECK(c.tp == 1 || !c.compare_sim, "[train.config] --compare-sim with tp=", c.tp,
              " is not supported yet (it compares one pipeline of whole layers); use --tp 1");
  BATON_CHECK(std::isfinite(c.bucket_mb) && c.bucket_mb > 0 && c.bucket_mb <= kMaxBucketMb,
              "[train.config] bucket-mb must be above 0 and at most ", kMaxBucketMb, " MiB, got ",
              c.bucket_mb);
  const DeviceKind device = parse_device(c.device);
  BATON_CHECK(c.max_memory_gb == 0 || (c.tp == 1 && device == DeviceKind::Cpu),
              "[train.config] --max-memory-gb caps the activation model's prediction, made on "
              "the CPU without tensor parallelism; leave it out with --tp ",
              c.tp, " --device ", printable(c.device));
}

// --allow-resume-change's names, and flags that need --save or --resume.
void check_resume_flags(const TrainConfig& c) {
  const std::vector<std::string> changeable = resume_change_names();
  for (const std::string& key : resume_change_keys(c)) {
    if (std::find(changeable.begin(), changeable.end(), key) != changeable.end()) continue;
    std::string names;
    for (const std::string& name : changeable) names += (names.empty() ? "" : ", ") + name;
    BATON_CHECK(false, "[train.config] allow-resume-change names \"", printable(key),
                "\"; expected a comma-separated list of ", names);
  }
  // Checkpoint flags that would do nothing are mistakes (as --save-every without --save).
  BATON_CHECK(c.keep_last == 0 || !c.save.empty(), "[train.config] --keep-last ", c.keep_last,
              " needs --save DIR: it says how many of --save's checkpoints to keep");
  BATON_CHECK(c.allow_resume_change.empty() || !c.resume.empty() || c.append_metrics,
              "[train.config] --allow-resume-change ", printable(c.allow_resume_change),
              " needs --resume: it says what may differ from the checkpoint a run resumes");
}

// The model's own sizes and the data it reads.
void check_model_and_data(const TrainConfig& c) {
  const bool decoder = is_decoder(c);
  if (decoder) {
    check_at_least_one("heads", c.heads);
    check_at_least_one("context", c.context);
  }
  BATON_CHECK(c.recompute != Recompute::Selective || decoder,
              "[train.config] --recompute selective ",
              "recomputes the attention regions that gpt's and llama's blocks mark; model ",
              c.model, " marks none (use never, except_last or always)");
  BATON_CHECK(c.data.empty() || c.text.empty(),
              "[train.config] --data and --text both given; "
              "train on one corpus: --data (tokenized) or --text (bytes)");
  BATON_CHECK(c.data.empty() || decoder,
              "[train.config] --data holds token ids for gpt and "
              "llama; model ",
              c.model, " reads none");
  BATON_CHECK(c.vocab == 0 || !c.data.empty(), "[train.config] --vocab ", c.vocab,
              " sizes the vocabulary of --data; without it gpt and llama read bytes (256)");
  BATON_CHECK(c.valid.empty() || !c.data.empty(),
              "[train.config] --valid is a held-out --data corpus; give --data too");
  BATON_CHECK(c.eval_every == 0 || !c.valid.empty(), "[train.config] --eval-every ", c.eval_every,
              " evaluates on --valid PREFIX; give it");
  if (c.model == "mlp") {
    check_at_least_one("in_features", c.in_features);
    check_at_least_one("classes", c.classes);
  }
}

// Counts, rates, the timeout and the threads.
void check_sizes(const TrainConfig& c) {
  check_at_least_one("microbatches", c.microbatches);
  check_at_least_one("batch", c.batch);
  check_at_least_one("layers", c.layers);
  check_at_least_one("hidden", c.hidden);
  check_at_least_one("log_every", c.log_every);
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
  BATON_CHECK(c.zero >= 0 && c.zero <= 3,
              "[train.config] zero must be 0 to 3 (the ZeRO stage: 1 shards the optimizer state "
              "over the dp replicas, 2 the gradients too, 3 the parameters too), got ",
              c.zero);
}

void check_saving(const TrainConfig& c) {
  BATON_CHECK(c.save_every == 0 || !c.save.empty(), "[train.config] --save-every ", c.save_every,
              " needs --save DIR to say where");
  BATON_CHECK(c.max_restarts == 0 || !c.save.empty(), "[train.config] --max-restarts ",
              c.max_restarts, " needs --save DIR: a restart resumes from its newest checkpoint");
  BATON_CHECK(c.resume != "auto" || !c.save.empty(),
              "[train.config] --resume auto resumes from the newest checkpoint in --save; give "
              "--save DIR");
}

// The batch against the micro-batches and the replicas.
void check_batch_split(const TrainConfig& c) {
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

}  // namespace

void check_config(const TrainConfig& c) {
  check_each_option(c);
  check_layout(c);
  check_resume_flags(c);
  check_model_and_data(c);
  check_sizes(c);
  check_saving(c);
  check_batch_split(c);
}

}  // namespace baton::train
