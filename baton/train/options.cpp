#include "baton/train/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>

#include "baton/core/error.h"
#include "baton/core/expected_list.h"
#include "baton/core/printable.h"
#include "baton/schedule/generator.h"

namespace baton::train {
namespace {

using C = TrainConfig;

// One entry of the table being written, with chained setters.
struct Entry {
  Option& o;
  Entry& check(Check check, int64_t low = 0, int64_t high = 0) {
    o.check = check, o.low = low, o.high = high;
    return *this;
  }
  // A finite `unit` above 0; leaving it out means `off`.
  Entry& above_zero(std::string_view unit, std::string_view off) {
    o.unit = unit, o.off = off;
    return check(Check::kFiniteAboveZero);
  }
  Entry& resume(Resume resume) { return o.resume = resume, *this; }
  Entry& choices(std::vector<std::string_view> names) {
    return o.choices = std::move(names), *this;
  }
  Entry& path() { return o.is_path = true, *this; }
  Entry& bare() { return o.is_switch = true, *this; }
};

// Entries in the order of `baton train --help`.
std::vector<Option> make_options() {
  std::vector<Option> o;
  o.reserve(80);  // an Entry refers into `o`
  auto add = [&o](std::string_view flag, std::string_view key, Member member,
                  std::string_view help) {
    Option& option = o.emplace_back();
    option.flag = flag;
    option.key = key;
    option.member = member;
    option.help = help;
    return Entry{option};
  };
  constexpr Resume kModel = Resume::kModel, kRecorded = Resume::kRecorded,
                   kAllowed = Resume::kAllowed;
  // Model
  add("--model", "model", &C::model, "mlp | cnn | gpt | llama | resnet")
      .resume(kModel)
      .choices({"mlp", "cnn", "gpt", "llama", "resnet"});
  add("--layers", "layers", &C::layers,
      "mlp: Linear layers; gpt, llama: transformer blocks; resnet: bottleneck blocks")
      .resume(kModel);
  add("--hidden", "hidden", &C::hidden,
      "Hidden width (mlp, gpt, llama); resnet: the first stage's bottleneck width")
      .resume(kModel);
  add("--heads", "heads", &C::heads, "Attention heads (gpt, llama)").resume(kModel);
  add("--context", "context", &C::context, "Tokens per sample (gpt, llama)").resume(kModel);
  add("--in-features", "in_features", &C::in_features, "Input features (mlp, synthetic data)")
      .resume(kModel);
  add("--classes", "classes", &C::classes, "Classes (mlp, synthetic data)").resume(kModel);
  // Data
  add("--text", "text", &C::text, "UTF-8 text file for gpt and llama (default: GPL-3 text)").path();
  add("--data", "data", &C::data,
      "gpt, llama: a tokenized corpus, PREFIX of Megatron's PREFIX.idx/.bin (baton data "
      "prepare) or a flat file of ids; memory-mapped; its vocabulary from PREFIX.model or --vocab")
      .path();
  add("--data-format", "data_format", &C::data_format,
      "With --data: megatron (default), flat-uint16 or flat-uint32 (nanoGPT's train.bin)")
      .choices({"megatron", "flat-uint16", "flat-uint32"});
  // Recorded as the vocabulary in use (checkpoint_flags.cpp).
  add("--vocab", "vocab", &C::vocab,
      "With --data and no PREFIX.model: the vocabulary size (257 for --byte-level data)")
      .check(Check::kCount, 1)
      .resume(kModel);
  add("--valid", "valid", &C::valid,
      "With --data: a held-out corpus in the same format; its loss and perplexity every "
      "--eval-every steps and at the end")
      .path();
  add("--eval-every", "eval_every", &C::eval_every,
      "With --valid: evaluate every N steps (default: at the end only)")
      .check(Check::kCount, 1);
  add("--eval-batches", "eval_batches", &C::eval_batches,
      "With --valid: the held-out samples, this many batches from its start, in order "
      "(default 4)")
      .check(Check::kCount, 1);
  add("--data-dir", "data_dir", &C::data_dir, "Fashion-MNIST folder of .gz files").path();
  add("--cache-dir", "cache_dir", &C::cache_dir,
      "Where decompressed data is kept (default ~/.cache/baton), a folder per --data-dir")
      .path();
  // Parallelism
  add("--pp", "pp", &C::pp, "Pipeline ranks").resume(kRecorded);
  add("--dp", "dp", &C::dp,
      "Data-parallel replicas of the pipeline (--nproc dp*pp; --batch is the global batch)");
  add("--bucket-mb", "bucket_mb", &C::bucket_mb,
      "Gradient bucket size in MiB for the dp all-reduces (default 25, as DDP)");
  add("--overlap-grad-reduce", "overlap_grad_reduce", &C::overlap_grad_reduce,
      "With --dp: start each gradient bucket's all-reduce right after its last backward, "
      "overlapping the rest (default on); off, every bucket waits for the step's last backward "
      "(Megatron's --overlap-grad-reduce off)");
  add("--precision", "precision", &C::precision,
      "Compute dtype of the layers: fp32 | bf16 | fp16 (autocast over fp32 master weights; "
      "fp16 with dynamic loss scaling)")
      .resume(kAllowed);
  add("--clip-grad-norm", "clip_grad_norm", &C::clip_grad_norm,
      "Clip the gradients to this global L2 norm before each update (over the whole model, as "
      "torch.nn.utils.clip_grad_norm_; a step whose norm is not finite is skipped)")
      .above_zero("norm", "no clipping")
      .resume(kAllowed);
  add("--max-memory-gb", "max_memory_gb", &C::max_memory_gb,
      "Refuse the layout, before the first step, if any rank's predicted peak (every byte it "
      "allocates, by the activation model) exceeds this many GB (1e9 bytes)")
      .above_zero("number of GB", "no cap");
  add("--tp", "tp", &C::tp,
      "Tensor-parallel ranks per stage (gpt, llama: heads and MLP split, must divide --heads; "
      "mlp: column/row Linear pairs, must divide --hidden; --nproc dp*pp*tp)");
  add("--tp-scatter-gather", "tp_scatter_gather", &C::tp_scatter_gather,
      "With --tp: send 1/tp of each boundary activation between stages and all-gather it over tp "
      "(Megatron's scatter/gather; on or off, default on)");
  add("--zero", "zero", &C::zero,
      "ZeRO stage 0-3: 1 shards the optimizer state over the dp replicas, 2 the gradients too, "
      "3 the parameters too (with --dp 1 it changes nothing; 2 and 3 need a schedule with a "
      "flush)");
  add("--prefetch-unshard", "prefetch_unshard", &C::prefetch_unshard,
      "With --zero and --dp: start each stage's parameter all-gather (UNSHARD) one compute "
      "ahead of its first compute (default on); off, right before it, to measure what the "
      "prefetch hides (the metrics' unshard_wait_ms)");
  // Schedule
  add("--schedule", "schedule", &C::schedule,
      "naive, gpipe, 1f1b, interleaved, looped-bfs, zb-h1, zb-h2, zb-v, "
      "interleaved-zb, chimera, dualpipev, v-half, v-min, zb-auto, 2bw, pipedream, async, "
      "pipemare")
      .resume(kRecorded);
  add("--virtual", "virtual", &C::virtual_stages,
      "Stage chunks per rank (interleaved, looped-bfs, interleaved-zb)")
      .check(Check::kRange, 1, 1024)
      .resume(kRecorded);
  add("--schedule-file", "schedule_file", &C::schedule_file,
      "Run this schedule file (baton's text format, or PyTorch's CSV if it ends in .csv) instead "
      "of --schedule; its ranks must equal --pp, its micro-batches set --microbatches")
      .path();
  add("--microbatches", "microbatches", &C::microbatches, "Micro-batches per step")
      .resume(kRecorded);
  // Optimisation
  add("--batch", "batch", &C::batch, "Mini-batch size").resume(kAllowed);
  add("--steps", "steps", &C::steps, "Optimizer steps (overrides --epochs)")
      .check(Check::kCount, 1)
      .resume(kRecorded);
  add("--epochs", "epochs", &C::epochs, "Epochs over the dataset")
      .check(Check::kCount, 1)
      .resume(kRecorded);
  add("--lr", "lr", &C::lr, "Learning rate").resume(kRecorded);
  add("--lr-schedule", "lr_schedule", &C::lr_schedule, "constant | cosine").resume(kAllowed);
  add("--warmup-steps", "warmup_steps", &C::warmup_steps,
      "Raise the learning rate linearly from --lr/N to --lr over the first N steps, then follow "
      "--lr-schedule over the rest (Megatron's --lr-warmup-iters; default 0: no warm-up)")
      .check(Check::kCount, 0)
      .resume(kAllowed);
  add("--optimizer", "optimizer", &C::optimizer, "sgd | adam | adamw").resume(kRecorded);
  add("--weight-decay", "weight_decay", &C::weight_decay,
      "L2 penalty (sgd, adam) or decoupled weight decay (adamw; default 0.01, as LibTorch); "
      "finite, at least 0")
      .check(Check::kFiniteAtLeastZero)
      .resume(kRecorded);
  add("--label-smoothing", "label_smoothing", &C::label_smoothing,
      "Cross entropy against targets smoothed by this much: 1 - X on the label, X / classes on "
      "every class (PyTorch's label_smoothing); in [0, 1), default 0")
      .check(Check::kUnitInterval);
  add("--augment", "augment", &C::augment,
      "cnn, resnet: move each training image by up to --augment-shift pixels and mirror it "
      "with probability 1/2 (on or off, default off)")
      .resume(kRecorded);
  add("--augment-shift", "augment_shift", &C::augment_shift,
      "With --augment: the largest move, 0 to 8 pixels (default 2)")
      .check(Check::kRange, 0, 8)
      .resume(kRecorded);
  add("--test-set", "test_set", &C::test_set,
      "cnn, resnet, mlp: the test set's accuracy at the end (on or off, default on; off ends "
      "the run after its last step)");
  add("--seed", "seed", &C::seed, "Seed of weights and data")
      .check(Check::kUint64)
      .resume(kAllowed);
  add("--balance", "balance", &C::balance, "uniform | params | time | memory | optimal | 3,5,...")
      .resume(kRecorded);
  add("--recompute", "recompute", &C::recompute,
      "Recompute activations in the backward: never | except_last | always | selective (gpt, "
      "llama: attention's scores and softmax; gpt's GELU too)")
      .resume(kRecorded);
  add("--pipemare-warmup", "pipemare_warmup", &C::pipemare_warmup,
      "--schedule pipemare: steps over which each stage's learning rate rises from 1/(delay+1) "
      "of --lr to --lr (PipeMare's rescheduling; default 100, 0: off)")
      .check(Check::kCount, 0);
  add("--pipemare-correction", "pipemare_correction", &C::pipemare_correction,
      "--schedule pipemare: run each backward on the weights extrapolated back by the stage's "
      "delay times its velocity (PipeMare's discrepancy correction; on or off, default on)");
  add("--pipemare-decay", "pipemare_decay", &C::pipemare_decay,
      "--schedule pipemare: the velocity's decay D in [0, 1), what an old weight delta still "
      "counts one delay later (default 0.5)")
      .check(Check::kUnitInterval);
  // Processes
  add("--threads", "threads", &C::threads,
      "Intra-op threads per rank (default: cores / local ranks)");
  add("--realtime", "realtime", &C::realtime,
      "Run each rank in the real-time scheduling class SCHED_FIFO, for a machine other busy "
      "processes share; needs CAP_SYS_NICE or ulimit -r >= 1 (on or off, default off)");
  add("--timeout", "timeout", &C::timeout_s, "Seconds any wait between ranks may take");
  add("--transport", "transport", &C::transport,
      "Point-to-point between ranks: auto (shared memory on one host, else Gloo), shm or gloo");
  // No choices here: "cuda:N" takes any N; check_config reads it with parse_device.
  add("--device", "device", &C::device,
      "Where stages run: cpu; cuda (rank on cuda:LOCAL_RANK, NCCL between ranks); or cuda:N "
      "(every rank on GPU N, shared memory or Gloo between them)");
  // Output
  add("--metrics", "metrics", &C::metrics, "Write JSON lines of metrics").path();
  add("--trace", "trace", &C::trace, "Write the last step's measured timeline as a Chrome trace")
      .path();
  add("--svg", "svg", &C::svg, "Write the last step's measured timeline as SVG").path();
  add("--profile-out", "profile_out", &C::profile_out,
      "Profile the layers on one micro-batch, write them as JSON for baton plan --profile, and "
      "exit")
      .path();
  add("--log-every", "log_every", &C::log_every, "Print progress every N steps");
  // Checkpoints
  add("--save", "save", &C::save,
      "Save a checkpoint into this folder at the end (and every --save-every steps)")
      .path();
  add("--save-every", "save_every", &C::save_every, "Also save every N steps (needs --save)")
      .check(Check::kCount, 1);
  add("--resume", "resume", &C::resume,
      "Continue from the checkpoint in this folder (--steps stays the total); auto: from "
      "--save's newest checkpoint when there is one (under torchrun's --max-restarts)")
      .path();
  add("--max-restarts", "max_restarts", &C::max_restarts,
      "With --nproc and --save: when a rank dies, stop every rank and start them all again "
      "from --save's newest checkpoint, up to this many times (default 0)")
      .check(Check::kCount, 0);
  add("--allow-resume-change", "allow_resume_change", &C::allow_resume_change,
      "With --resume: what may differ from the checkpoint's run, a comma-separated subset of "
      "precision, clip-grad-norm, batch, lr-schedule, warmup-steps, seed, data (otherwise a "
      "change is refused)");
  add("--keep-last", "keep_last", &C::keep_last,
      "Saves kept in --save's folder, newest first (default 2); older ones baton wrote there "
      "are removed after each save, never the one --resume read")
      .check(Check::kCount, 1);
  // Bare flags on the command line
  add("--tie-embeddings", "tie_embeddings", &C::tie_embeddings,
      "gpt, llama: one matrix for the token embedding and the LM head; on different stages each "
      "holds a copy and REDUCE_TIED sums their gradients")
      .bare()
      .resume(kModel);
  add("--step-barrier", "step_barrier", &C::step_barrier,
      "End every step with a blocking all-reduce of the loss (no overlap of steps; to measure "
      "what overlapping buys)")
      .bare();
  add("--compare-sim", "compare_sim", &C::compare_sim,
      "Print measured vs simulated step time and peak activations")
      .bare();
  BATON_ASSERT(o.size() <= 80, "the options table outgrew its reservation");
  return o;
}

// TOML's basic string: quotes, backslashes and control characters escaped.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (u < 0x20 || u == 0x7f) {
      static const char* hex = "0123456789ABCDEF";
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// The shortest text that reads back as `x`, with a '.' or an exponent so
// that TOML reads a float.
std::string float_text(double x) {
  BATON_CHECK(std::isfinite(x), "[train.config] cannot write the number ", x, " to TOML");
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  std::string text(buffer, result.ptr);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

// What `option` names in messages: its key with spaces ("lr schedule").
std::string what_of(const Option& option) {
  std::string what(option.key);
  for (char& ch : what) ch = ch == '_' ? ' ' : ch;
  return what;
}

// "unknown lr schedule \"x\" (expected constant or cosine)": `name` is not
// one of `option`'s choices.
std::string unknown_choice(const Option& option, std::string_view name, const std::string& what) {
  return detail::concat("unknown ", what, " \"", printable(name), "\" (expected ",
                        expected_list(choices_of(option)), ")");
}

// `config`'s value of `option` in TOML ("1f1b" quoted, 0.001, true).
std::string toml_value(const Option& option, const TrainConfig& config) {
  return std::visit(
      [&config](auto member) -> std::string {
        using T = std::decay_t<decltype(config.*member)>;
        const T& value = config.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          return quoted(value);
        } else if constexpr (kIsChoice<T>) {
          return quoted(std::string(to_string(value)));
        } else if constexpr (std::is_same_v<T, bool>) {
          return value ? "true" : "false";
        } else if constexpr (std::is_floating_point_v<T>) {
          return float_text(value);
        } else {
          return std::to_string(value);
        }
      },
      option.member);
}

}  // namespace

const std::vector<Option>& options() {
  static const std::vector<Option> table = make_options();
  return table;
}

const Option* option_by_key(std::string_view key) {
  for (const Option& option : options()) {
    if (option.key == key) return &option;
  }
  return nullptr;
}

std::vector<std::string> choices_of(const Option& option) {
  if (option.key == "schedule") return schedule::schedule_names();
  return std::visit(
      [&option](auto member) -> std::vector<std::string> {
        using T = std::decay_t<decltype(TrainConfig().*member)>;
        if constexpr (kIsChoice<T>) {
          std::vector<std::string> names;
          for (const T value : ChoiceValues<T>::kAll) names.emplace_back(to_string(value));
          return names;
        } else {
          return {option.choices.begin(), option.choices.end()};
        }
      },
      option.member);
}

bool is_choice(const Option& option) {
  return std::visit(
      [](auto member) { return kIsChoice<std::decay_t<decltype(TrainConfig().*member)>>; },
      option.member);
}

void parse_choice(const Option& option, std::string_view name, TrainConfig& config) {
  std::visit(
      [&](auto member) {
        using T = std::decay_t<decltype(config.*member)>;
        if constexpr (kIsChoice<T>) {
          if (const std::optional<T> value = choice_named<T>(name)) {
            config.*member = *value;
            return;
          }
          // "recompute mode", as parse_recompute says it.
          const bool mode = std::is_same_v<T, Recompute>;
          throw Error(unknown_choice(option, name, what_of(option) + (mode ? " mode" : "")));
        } else {
          throw Error(detail::concat("[train.config] ", option.flag, " is not a choice"));
        }
      },
      option.member);
}

std::string option_problem(const Option& option, const TrainConfig& config) {
  return std::visit(
      [&option, &config](auto member) -> std::string {
        using T = std::decay_t<decltype(config.*member)>;
        const T& value = config.*member;
        if constexpr (std::is_same_v<T, std::string>) {
          const std::vector<std::string> choices = choices_of(option);
          if (choices.empty() || std::find(choices.begin(), choices.end(), value) != choices.end())
            return "";
          return unknown_choice(option, value, what_of(option));
        } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint64_t> ||
                             kIsChoice<T>) {
          return "";
        } else if constexpr (std::is_floating_point_v<T>) {
          switch (option.check) {
            case Check::kFiniteAboveZero:
              if (std::isfinite(value) && value > 0) return "";
              return detail::concat("must be a finite ", option.unit, " above 0, got ", value,
                                    " (leave it out for ", option.off, ")");
            case Check::kFiniteAtLeastZero:
              if (std::isfinite(value) && value >= 0) return "";
              return detail::concat("must be finite and at least 0, got ", value);
            case Check::kUnitInterval:
              if (std::isfinite(value) && value >= 0 && value < 1) return "";
              return detail::concat("must be in [0, 1), got ", value);
            default:
              return "";
          }
        } else {
          if (option.check == Check::kCount && value < option.low) {
            return detail::concat("must be at least ", option.low, ", got ", value);
          }
          if (option.check == Check::kRange && (value < option.low || value > option.high)) {
            return detail::concat("must be in [", option.low, ", ", option.high, "], got ", value);
          }
          return "";
        }
      },
      option.member);
}

bool at_default(const Option& option, const TrainConfig& config) {
  static const TrainConfig defaults;
  return std::visit([&](auto member) { return config.*member == defaults.*member; }, option.member);
}

std::string config_toml(const TrainConfig& config, const std::vector<std::string>& keys,
                        const std::string& header) {
  std::string out;
  std::string::size_type begin = 0;
  while (begin < header.size()) {
    const auto end = std::min(header.find('\n', begin), header.size());
    out += "# " + header.substr(begin, end - begin) + "\n";
    begin = end + 1;
  }
  for (const std::string& key : keys) {
    const Option* option = option_by_key(key);
    BATON_CHECK(option != nullptr, "[train.config] no option has the TOML key \"", key, "\"");
    out += key + " = " + toml_value(*option, config) + "\n";
  }
  return out;
}

std::vector<std::string> resume_change_names() {
  std::vector<std::string> names;
  for (const Option& option : options()) {
    if (option.resume == Resume::kAllowed) names.emplace_back(option.flag.substr(2));
  }
  names.emplace_back("data");
  return names;
}

}  // namespace baton::train
