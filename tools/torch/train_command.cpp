// baton train: flags over a TOML config; with --nproc N, starts N local ranks
// (this same command line, with torchrun's variables set); under torchrun or
// our launcher (RANK set), runs as that one rank.
#include <c10/util/Exception.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "baton/comm/launcher.h"
#include "baton/comm/rank_env.h"
#include "baton/core/error.h"
#include "baton/core/output_files.h"
#include "baton/schedule/runnable_file.h"
#include "baton/train/checkpoint_flags.h"
#include "baton/train/config.h"
#include "baton/train/profile_output.h"
#include "baton/train/trainer.h"
#include "tools/cli.h"

namespace baton::cli {
namespace {

struct TrainFlags {
  CLI::App* cmd = nullptr;
  std::string config_file;
  int nproc = 0;
  train::TrainConfig values;  // what the flags said
  // Copies a flag's value into the final config when the flag was given.
  std::vector<std::pair<CLI::Option*, std::function<void(train::TrainConfig&)>>> given;
  std::vector<std::string> argv;
  // --checkpoint, the deprecated name of --recompute.
  std::string checkpoint;
  CLI::Option* checkpoint_option = nullptr;
  CLI::Option* recompute_option = nullptr;
  CLI::Option* schedule_option = nullptr;
  CLI::Option* virtual_option = nullptr;
  CLI::Option* schedule_file_option = nullptr;
  CLI::Option* microbatches_option = nullptr;
};

// Set in the launcher's environment so its ranks do not repeat its warnings.
constexpr const char* kWarnedVariable = "BATON_DEPRECATIONS_WARNED";
// The launcher's pid, set in its environment: a rank whose parent it is was
// started by --nproc, which its command line repeats.
constexpr const char* kLauncherVariable = "BATON_LAUNCHER_PID";

template <typename T>
CLI::Option* flag(CLI::App* cmd, TrainFlags& f, const std::string& name,
                  T train::TrainConfig::*member, const std::string& help) {
  CLI::Option* option = cmd->add_option(name, f.values.*member, help);
  f.given.emplace_back(option,
                       [&f, member](train::TrainConfig& c) { c.*member = f.values.*member; });
  return option;
}

// CLI11 reads a uint64 with strtoull, which saturates and wraps without a word.
const CLI::Validator kUint64(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      errno = 0;
      const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
      (void)value;
      const bool digits = !text.empty() && std::isdigit(static_cast<unsigned char>(text[0]));
      if (digits && errno == 0 && *end == '\0') return "";
      return "must be an integer in [0, 18446744073709551615], got " + text;
    },
    "UINT64");

// A count of at least `minimum` that fits an int. CLI11's Range calls a word
// "not in range"; this names what is wrong with it.
CLI::Validator count_at_least(int minimum) {
  return CLI::Validator(
      [minimum](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long value = std::strtoll(text.c_str(), &end, 10);
        // Digits past long long's range (ERANGE) are a whole number out of range, not a word.
        const bool integer = !text.empty() && end != nullptr && end != text.c_str() && *end == '\0';
        if (!integer) {
          return "must be a whole number of at least " + std::to_string(minimum) + ", got \"" +
                 text + "\"";
        }
        if (errno == ERANGE || value < minimum || value > std::numeric_limits<int>::max()) {
          return "must be an integer in [" + std::to_string(minimum) + ", " +
                 std::to_string(std::numeric_limits<int>::max()) + "], got " + text;
        }
        return "";
      },
      "COUNT");
}
const CLI::Validator kCount = count_at_least(1);

// A finite number above 0 (CLI11 would read "inf" and "nan"), refused as
// "must be a finite <what> above 0, got <text>".
CLI::Validator finite_above_zero(const std::string& what, const std::string& name) {
  return CLI::Validator(
      [what](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        const bool number = !text.empty() && end != nullptr && *end == '\0' && errno == 0;
        if (number && std::isfinite(value) && value > 0) return "";
        return "must be a finite " + what + " above 0, got " + text;
      },
      name);
}
const CLI::Validator kPositiveNorm = finite_above_zero("norm", "NORM");
const CLI::Validator kPositiveGb = finite_above_zero("number of GB", "GB");

// A number in [0, 1) (PipeMare's decay).
const CLI::Validator kDecay(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      errno = 0;
      const double value = std::strtod(text.c_str(), &end);
      const bool number = !text.empty() && end != nullptr && *end == '\0' && errno == 0;
      if (number && value >= 0 && value < 1) return "";
      return "must be a number in [0, 1), got " + text;
    },
    "DECAY");

// True when `message` already names "rank <rank>" (not "rank <rank>0").
bool names_rank(const std::string& message, int rank) {
  const std::string name = "rank " + std::to_string(rank);
  for (size_t pos = message.find(name); pos != std::string::npos;
       pos = message.find(name, pos + 1)) {
    const size_t end = pos + name.size();
    if (end == message.size() || !std::isdigit(static_cast<unsigned char>(message[end])))
      return true;
  }
  return false;
}

std::string naming_rank(int rank, const std::string& message) {
  return names_rank(message, rank) ? message : "rank " + std::to_string(rank) + ": " + message;
}

std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// Runs this process's rank. Input was checked before, so a failure now is a
// runtime fault: one line naming the rank, exit code 1 (3 for a LibTorch error
// that is not out of memory: a bug in baton).
int run_rank(const train::TrainConfig& config, const comm::RankEnv& context) {
  try {
    train::train(config, context);
    flush_stdout("[train]");
    return 0;
  } catch (const train::RefusedBeforeFirstStep& e) {
    // Bad input (exit 2, no restart); rank 0 says it for all.
    if (std::string(e.what()).empty()) return 2;
    print_error(naming_rank(context.rank, e.what()));
    return 2;
  } catch (const Error& e) {
    print_error(naming_rank(context.rank, e.what()));
  } catch (const c10::Error& e) {
    const std::string what = first_line(e.what_without_backtrace());
    if (what.find("can't allocate memory") == std::string::npos) {
      print_error(naming_rank(context.rank, "internal: " + what));
      return 3;
    }
    print_error(::baton::detail::concat("rank ", context.rank, " ran out of memory: ", what));
  } catch (const std::bad_alloc&) {
    print_error(
        ::baton::detail::concat("rank ", context.rank, " ran out of memory (std::bad_alloc)"));
  }
  return 1;
}

// A path flag given an empty value (`--save "$UNSET"`) would silently mean
// "not given": refuse it by name instead.
void check_no_empty_paths(const CLI::App& cmd) {
  for (const char* name :
       {"--config", "--text", "--data", "--valid", "--data-dir", "--cache-dir", "--schedule-file",
        "--metrics", "--trace", "--svg", "--profile-out", "--save", "--resume"}) {
    const CLI::Option* option = cmd.get_option_no_throw(name);
    if (option == nullptr || option->count() == 0) continue;
    for (const std::string& value : option->results()) {
      BATON_CHECK(!value.empty(), "[train] ", name,
                  " was given an empty value (an unset "
                  "variable?); give a path or leave the flag out");
    }
  }
}

// `argv` with --resume set to `value`: a given one replaced (in either
// form), else added.
std::vector<std::string> with_resume(std::vector<std::string> argv, const std::string& value) {
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "--resume" && i + 1 < argv.size()) {
      argv[i + 1] = value;
      return argv;
    }
    if (argv[i].rfind("--resume=", 0) == 0) {
      argv[i] = "--resume=" + value;
      return argv;
    }
  }
  argv.push_back("--resume");
  argv.push_back(value);
  return argv;
}

int run(TrainFlags& f) {
  check_given_once(*f.cmd);
  // Before the launcher's pipes or any output file could take descriptor 1.
  check_stdout_open("[train]");
  train::TrainConfig config;
  std::vector<std::string> deprecations;
  if (!f.config_file.empty()) train::load_toml(f.config_file, config, &deprecations);
  config.config_file = f.config_file;
  for (auto& [option, copy] : f.given) {
    if (option->count() > 0) copy(config);
  }
  if (f.checkpoint_option->count() > 0) {
    BATON_CHECK(
        f.recompute_option->count() == 0,
        "[train] --checkpoint and --recompute both given; --checkpoint is the deprecated name "
        "of --recompute, keep only that");
    config.recompute = f.checkpoint;
    deprecations.push_back("--checkpoint is deprecated, use --recompute");
  }
  if (!config.schedule_file.empty()) {
    BATON_CHECK(f.schedule_option->count() == 0 && f.virtual_option->count() == 0,
                "[train] --schedule-file gives the schedule; drop --schedule and --virtual");
    // The file decides the micro-batch count unless --microbatches says it (then they must agree).
    if (f.microbatches_option->count() == 0) {
      config.microbatches = schedule::load_runnable_schedule(config.schedule_file).microbatches;
    }
  }
  const auto env = comm::rank_env_from_environment();
  const char* launcher = std::getenv(kLauncherVariable);
  const bool our_rank = launcher != nullptr && std::to_string(getppid()) == launcher;
  BATON_CHECK(!env || f.nproc == 0 || our_rank, "[train] RANK=", env ? env->rank : 0,
              " and WORLD_SIZE=", env ? env->world_size : 0,
              " are set (by a launcher such as torchrun) and --nproc ", f.nproc,
              " is given too: drop --nproc to run as that one rank, or unset RANK and "
              "WORLD_SIZE to start ",
              f.nproc, " local ranks");
  // One warning per job: from the launcher, or from rank 0 under torchrun.
  if ((!env || env->rank == 0) && std::getenv(kWarnedVariable) == nullptr) {
    for (const auto& line : deprecations) std::cerr << "baton: warning: " << line << std::endl;
  }
  train::check_config(config);
  config.in_rank = env.has_value();
  config.launcher_checked = our_rank;
  BATON_CHECK(
      config.max_restarts == 0 || our_rank || (!env && f.nproc > 1),
      "[train] --max-restarts restarts the ranks that --nproc starts; ",
      env ? "under torchrun, use its --max-restarts with --resume auto" : "give --nproc N (N > 1)");
  train::resolve_resume_auto(config);
  if (!config.profile_out.empty()) {
    // Profile and exit: one process, no ranks; under torchrun only rank 0 writes.
    if (env && env->rank != 0) return 0;
    train::check_setup(config);
    train::write_profile(config);
    std::cout << "baton train: wrote the profile of " << config.model << " to "
              << config.profile_out << "\n";
    flush_stdout("[train]");
    return 0;
  }
  if (env) {
    // The same checks on every launch path, before the first step (exit 2):
    // torchrun starts ranks that nothing checked, and a rank of ours that
    // finds bad input must exit 2 so that no launcher restarts on it. Rank 0
    // alone tries the output paths (several ranks trying one path would race).
    train::check_setup(config, /*check_outputs=*/env->rank == 0);
    return run_rank(config, *env);
  }
  const int nproc = f.nproc > 0 ? f.nproc : 1;
  const int world = config.dp * config.pp * config.tp;
  BATON_CHECK(nproc == world, "[train] dp=", config.dp, " x pp=", config.pp,
              config.tp > 1 ? detail::concat(" x tp=", config.tp) : std::string(), " needs ", world,
              " ranks but --nproc is ", nproc, ": pass --nproc ", world,
              ", or start the ranks with torchrun");
  train::check_setup(config);
  if (nproc == 1) return run_rank(config, comm::RankEnv{});
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  BATON_CHECK(n > 0, "[train] cannot find this executable to start the ranks");
  exe[n] = '\0';
  std::vector<std::string> argv = f.argv;
  argv[0] = exe;
  const std::vector<std::string> first_argv = argv;
  comm::LaunchOutcome outcome;
  comm::LaunchOptions options;
  options.outcome = &outcome;
  setenv(kWarnedVariable, "1", 1);
  setenv(kLauncherVariable, std::to_string(getpid()).c_str(), 1);
  // Decision: more intra-op threads than cores over all ranks, and LibTorch's
  // OpenMP threads would spin between parallel regions on the cores the
  // other ranks need (2 ranks x --threads 2 on 2 cores: 1.9 s a step against
  // 0.25 s, bench/RESULTS.md "Waiting under load"); they sleep instead,
  // unless the user chose a policy. libgomp reads it once at start-up, so
  // the launcher sets it; the transport stops spinning too (spin_policy.h).
  const int cores = train::available_cores();
  const int threads = config.threads > 0 ? config.threads : std::max(1, cores / nproc);
  if (nproc * threads > cores && std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  }
  // A failed write of the ranks' lines the launcher reports itself.
  int rc = comm::launch_local(nproc, argv, options);
  // --max-restarts: a rank died (not the launcher stopped, not a refused
  // input, which a restart would meet again): every rank again, from the
  // newest checkpoint in --save, or, while it holds none, from where the run
  // started (its --resume, or step 0), so the restarted run is the
  // undisturbed one.
  for (int restart = 1; restart <= config.max_restarts; ++restart) {
    if (rc == 0 || rc == 2 || outcome.interrupted || outcome.failed_rank < 0) break;
    const int64_t step = train::newest_checkpoint_step(config.save);
    if (config.steps > 0 && step >= config.steps) {
      // Training had ended (the last save is the last step): nothing to resume.
      std::cerr << "[launch] " << outcome.cause << "; not restarting: the newest checkpoint in "
                << config.save << " is the last step (" << step << ")" << std::endl;
      break;
    }
    std::cerr << "[launch] " << outcome.cause << ": restart " << restart << " of "
              << config.max_restarts << ", every rank "
              << (step >= 0
                      ? detail::concat("resumes from step ", step, " of ", config.save)
                      : detail::concat("starts again from ",
                                       config.resume.empty() ? std::string("step 0")
                                                             : "the checkpoint in " + config.resume,
                                       " (no checkpoint in ", config.save, " yet)"))
              << std::endl;
    argv = step >= 0 ? with_resume(first_argv, config.save) : first_argv;
    rc = comm::launch_local(nproc, argv, options);
  }
  return rc;
}

}  // namespace

Action add_train(CLI::App& app) {
  auto f = std::make_shared<TrainFlags>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model with pipeline parallelism");
  take_repeated_options(cmd);  // reported by run(), by name
  f->cmd = cmd;
  cmd->add_option("--config", f->config_file, "TOML config; flags override its keys")
      ->check(CLI::ExistingFile);
  cmd->add_option("--nproc", f->nproc, "Start this many local ranks (dp * pp * tp)")
      ->check(CLI::Range(1, 1024));
  flag(cmd, *f, "--model", &train::TrainConfig::model, "mlp | cnn | gpt | llama | resnet");
  flag(cmd, *f, "--layers", &train::TrainConfig::layers,
       "mlp: Linear layers; gpt, llama: transformer blocks; resnet: bottleneck blocks");
  flag(cmd, *f, "--hidden", &train::TrainConfig::hidden,
       "Hidden width (mlp, gpt, llama); resnet: the first stage's bottleneck width");
  flag(cmd, *f, "--heads", &train::TrainConfig::heads, "Attention heads (gpt, llama)");
  flag(cmd, *f, "--context", &train::TrainConfig::context, "Tokens per sample (gpt, llama)");
  flag(cmd, *f, "--in-features", &train::TrainConfig::in_features,
       "Input features (mlp, synthetic data)");
  flag(cmd, *f, "--classes", &train::TrainConfig::classes, "Classes (mlp, synthetic data)");
  flag(cmd, *f, "--text", &train::TrainConfig::text,
       "UTF-8 text file for gpt and llama (default: GPL-3 text)");
  flag(
      cmd, *f, "--data", &train::TrainConfig::data,
      "gpt, llama: a tokenized corpus, PREFIX of Megatron's PREFIX.idx/.bin (baton data "
      "prepare) or a flat file of ids; memory-mapped; its vocabulary from PREFIX.model or --vocab");
  flag(cmd, *f, "--data-format", &train::TrainConfig::data_format,
       "With --data: megatron (default), flat-uint16 or flat-uint32 (nanoGPT's train.bin)");
  flag(cmd, *f, "--vocab", &train::TrainConfig::vocab,
       "With --data and no PREFIX.model: the vocabulary size (257 for --byte-level data)")
      ->check(kCount);
  flag(cmd, *f, "--valid", &train::TrainConfig::valid,
       "With --data: a held-out corpus in the same format; its loss and perplexity every "
       "--eval-every steps and at the end");
  flag(cmd, *f, "--eval-every", &train::TrainConfig::eval_every,
       "With --valid: evaluate every N steps (default: at the end only)")
      ->check(kCount);
  flag(cmd, *f, "--eval-batches", &train::TrainConfig::eval_batches,
       "With --valid: the held-out samples, this many batches from its start, in order "
       "(default 4)")
      ->check(kCount);
  flag(cmd, *f, "--data-dir", &train::TrainConfig::data_dir, "Fashion-MNIST folder of .gz files");
  flag(cmd, *f, "--cache-dir", &train::TrainConfig::cache_dir,
       "Where decompressed data is kept (default ~/.cache/baton), a folder per --data-dir");
  flag(cmd, *f, "--pp", &train::TrainConfig::pp, "Pipeline ranks");
  flag(cmd, *f, "--dp", &train::TrainConfig::dp,
       "Data-parallel replicas of the pipeline (--nproc dp*pp; --batch is the global batch)");
  flag(cmd, *f, "--bucket-mb", &train::TrainConfig::bucket_mb,
       "Gradient bucket size in MiB for the dp all-reduces (default 25, as DDP)");
  flag(cmd, *f, "--overlap-grad-reduce", &train::TrainConfig::overlap_grad_reduce,
       "With --dp: start each gradient bucket's all-reduce right after its last backward, "
       "overlapping the rest (default on); off, every bucket waits for the step's last backward "
       "(Megatron's --overlap-grad-reduce off)");
  flag(cmd, *f, "--precision", &train::TrainConfig::precision,
       "Compute dtype of the layers: fp32 | bf16 | fp16 (autocast over fp32 master weights; "
       "fp16 with dynamic loss scaling)");
  flag(cmd, *f, "--clip-grad-norm", &train::TrainConfig::clip_grad_norm,
       "Clip the gradients to this global L2 norm before each update (over the whole model, "
       "as torch.nn.utils.clip_grad_norm_; a step whose norm is not finite is skipped)")
      ->check(kPositiveNorm);
  flag(cmd, *f, "--max-memory-gb", &train::TrainConfig::max_memory_gb,
       "Refuse the layout, before the first step, if any rank's predicted peak (every byte it "
       "allocates, by the activation model) exceeds this many GB (1e9 bytes)")
      ->check(kPositiveGb);
  flag(cmd, *f, "--tp", &train::TrainConfig::tp,
       "Tensor-parallel ranks per stage (gpt, llama: heads and MLP split, must divide --heads; "
       "mlp: column/row Linear pairs, must divide --hidden; --nproc dp*pp*tp)");
  flag(cmd, *f, "--tp-scatter-gather", &train::TrainConfig::tp_scatter_gather,
       "With --tp: send 1/tp of each boundary activation between stages and all-gather it over tp "
       "(Megatron's scatter/gather; on or off, default on)");
  flag(cmd, *f, "--zero", &train::TrainConfig::zero,
       "ZeRO stage: 0, or 1 to shard the optimizer state over the dp replicas (with --dp 1 it "
       "changes nothing)");
  f->schedule_option =
      flag(cmd, *f, "--schedule", &train::TrainConfig::schedule,
           "naive, gpipe, 1f1b, interleaved, looped-bfs, zb-h1, zb-h2, zb-v, "
           "interleaved-zb, chimera, dualpipev, v-half, v-min, zb-auto, 2bw, pipedream, async, "
           "pipemare");
  f->virtual_option = flag(cmd, *f, "--virtual", &train::TrainConfig::virtual_stages,
                           "Stage chunks per rank (interleaved, looped-bfs, interleaved-zb)")
                          ->check(CLI::Range(1, 1024));
  f->schedule_file_option = flag(cmd, *f, "--schedule-file", &train::TrainConfig::schedule_file,
                                 "Run this schedule file (baton's text format, or PyTorch's CSV if "
                                 "it ends in .csv) instead of --schedule; "
                                 "its ranks must equal --pp, its micro-batches set --microbatches");
  f->microbatches_option =
      flag(cmd, *f, "--microbatches", &train::TrainConfig::microbatches, "Micro-batches per step");
  flag(cmd, *f, "--batch", &train::TrainConfig::batch, "Mini-batch size");
  flag(cmd, *f, "--steps", &train::TrainConfig::steps, "Optimizer steps (overrides --epochs)")
      ->check(kCount);
  flag(cmd, *f, "--epochs", &train::TrainConfig::epochs, "Epochs over the dataset")->check(kCount);
  flag(cmd, *f, "--lr", &train::TrainConfig::lr, "Learning rate");
  flag(cmd, *f, "--lr-schedule", &train::TrainConfig::lr_schedule, "constant | cosine");
  flag(cmd, *f, "--optimizer", &train::TrainConfig::optimizer, "sgd | adam | adamw");
  flag(cmd, *f, "--weight-decay", &train::TrainConfig::weight_decay,
       "L2 penalty (sgd, adam) or decoupled weight decay (adamw; default 0.01, as LibTorch); "
       "finite, at least 0")
      ->check(finite_number(false, "X"));
  flag(cmd, *f, "--label-smoothing", &train::TrainConfig::label_smoothing,
       "Cross entropy against targets smoothed by this much: 1 - X on the label, X / classes on "
       "every class (PyTorch's label_smoothing); in [0, 1), default 0")
      ->check(finite_number(false, "X"));
  flag(cmd, *f, "--augment", &train::TrainConfig::augment,
       "cnn, resnet: move each training image by up to --augment-shift pixels and mirror it "
       "with probability 1/2 (on or off, default off)");
  flag(cmd, *f, "--augment-shift", &train::TrainConfig::augment_shift,
       "With --augment: the largest move, 0 to 8 pixels (default 2)")
      ->check(CLI::Range(0, 8));
  flag(cmd, *f, "--seed", &train::TrainConfig::seed, "Seed of weights and data")->check(kUint64);
  flag(cmd, *f, "--balance", &train::TrainConfig::balance,
       "uniform | params | time | memory | optimal | 3,5,...");
  f->recompute_option = flag(cmd, *f, "--recompute", &train::TrainConfig::recompute,
                             "Recompute activations in the backward: never | except_last | always");
  f->checkpoint_option =
      cmd->add_option("--checkpoint", f->checkpoint, "Deprecated: use --recompute");
  flag(cmd, *f, "--pipemare-warmup", &train::TrainConfig::pipemare_warmup,
       "--schedule pipemare: steps over which each stage's learning rate rises from 1/(delay+1) "
       "of --lr to --lr (PipeMare's rescheduling; default 100, 0: off)")
      ->check(count_at_least(0));
  flag(cmd, *f, "--pipemare-correction", &train::TrainConfig::pipemare_correction,
       "--schedule pipemare: run each backward on the weights extrapolated back by the stage's "
       "delay times its velocity (PipeMare's discrepancy correction; on or off, default on)");
  flag(cmd, *f, "--pipemare-decay", &train::TrainConfig::pipemare_decay,
       "--schedule pipemare: the velocity's decay D in [0, 1), what an old weight delta still "
       "counts one delay later (default 0.5)")
      ->check(kDecay);
  flag(cmd, *f, "--threads", &train::TrainConfig::threads,
       "Intra-op threads per rank (default: cores / local ranks)");
  flag(cmd, *f, "--realtime", &train::TrainConfig::realtime,
       "Run each rank in the real-time scheduling class SCHED_FIFO, for a machine other busy "
       "processes share; needs CAP_SYS_NICE or ulimit -r >= 1 (on or off, default off)");
  flag(cmd, *f, "--timeout", &train::TrainConfig::timeout_s,
       "Seconds any wait between ranks may take");
  flag(cmd, *f, "--transport", &train::TrainConfig::transport,
       "Point-to-point between ranks: auto (shared memory on one host, else Gloo), shm or gloo");
  flag(cmd, *f, "--device", &train::TrainConfig::device,
       "Where stages run: cpu, or cuda (rank on cuda:LOCAL_RANK, NCCL between ranks)");
  flag(cmd, *f, "--metrics", &train::TrainConfig::metrics, "Write JSON lines of metrics");
  flag(cmd, *f, "--trace", &train::TrainConfig::trace,
       "Write the last step's measured timeline as a Chrome trace");
  flag(cmd, *f, "--svg", &train::TrainConfig::svg,
       "Write the last step's measured timeline as SVG");
  flag(cmd, *f, "--profile-out", &train::TrainConfig::profile_out,
       "Profile the layers on one micro-batch, write them as JSON for baton plan --profile, and "
       "exit");
  flag(cmd, *f, "--log-every", &train::TrainConfig::log_every, "Print progress every N steps");
  flag(cmd, *f, "--save", &train::TrainConfig::save,
       "Save a checkpoint into this folder at the end (and every --save-every steps)");
  flag(cmd, *f, "--save-every", &train::TrainConfig::save_every,
       "Also save every N steps (needs --save)")
      ->check(kCount);
  flag(cmd, *f, "--resume", &train::TrainConfig::resume,
       "Continue from the checkpoint in this folder (--steps stays the total); auto: from "
       "--save's newest checkpoint when there is one (under torchrun's --max-restarts)");
  flag(cmd, *f, "--max-restarts", &train::TrainConfig::max_restarts,
       "With --nproc and --save: when a rank dies, stop every rank and start them all again "
       "from --save's newest checkpoint, up to this many times (default 0)")
      ->check(count_at_least(0));
  flag(cmd, *f, "--allow-resume-change", &train::TrainConfig::allow_resume_change,
       "With --resume: what may differ from the checkpoint's run, a comma-separated subset of "
       "batch, seed, lr-schedule, clip-grad-norm, precision (otherwise a change is refused)");
  flag(cmd, *f, "--keep-last", &train::TrainConfig::keep_last,
       "Saves kept in --save's folder, newest first (default 2); older ones baton wrote there "
       "are removed after each save, never the one --resume read")
      ->check(kCount);
  CLI::Option* tie =
      cmd->add_flag("--tie-embeddings", f->values.tie_embeddings,
                    "gpt, llama: one matrix for the token embedding and the LM head; on "
                    "different stages each holds a copy and REDUCE_TIED sums their "
                    "gradients");
  f->given.emplace_back(
      tie, [f](train::TrainConfig& c) { c.tie_embeddings = f->values.tie_embeddings; });
  CLI::Option* barrier =
      cmd->add_flag("--step-barrier", f->values.step_barrier,
                    "End every step with a blocking all-reduce of the loss (no overlap of "
                    "steps; to measure what overlapping buys)");
  f->given.emplace_back(barrier,
                        [f](train::TrainConfig& c) { c.step_barrier = f->values.step_barrier; });
  CLI::Option* compare =
      cmd->add_flag("--compare-sim", f->values.compare_sim,
                    "Print measured vs simulated step time and peak activations");
  f->given.emplace_back(compare,
                        [f](train::TrainConfig& c) { c.compare_sim = f->values.compare_sim; });
  return [f] {
    f->argv = command_line();
    try {
      check_no_empty_paths(*f->cmd);
      return run(*f);
    } catch (const WriteError& e) {
      print_error(e.what());  // a failure while running, not bad input
      return 1;
    }
  };
}

}  // namespace baton::cli
