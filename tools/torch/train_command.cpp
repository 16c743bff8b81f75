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
#include <deque>
#include <iostream>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "baton/comm/launcher.h"
#include "baton/comm/rank_env.h"
#include "baton/core/error.h"
#include "baton/core/executable.h"
#include "baton/core/output_files.h"
#include "baton/schedule/runnable.h"
#include "baton/train/checkpoint_flags.h"
#include "baton/train/config.h"
#include "baton/train/options.h"
#include "baton/train/profile_output.h"
#include "baton/train/trainer.h"
#include "tools/cli.h"

namespace baton::cli {
namespace {

struct TrainFlags {
  CLI::App* cmd = nullptr;
  std::string config_file;
  int nproc = 0;
  train::TrainConfig values;             // what the flags said
  std::deque<std::string> choice_names;  // what the choices' flags said (parsed when copied)
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

// A number in [0, 1) (PipeMare's decay, label smoothing).
const CLI::Validator kUnitInterval(
    [](std::string& text) -> std::string {
      char* end = nullptr;
      errno = 0;
      const double value = std::strtod(text.c_str(), &end);
      const bool number = !text.empty() && end != nullptr && *end == '\0' && errno == 0;
      if (number && value >= 0 && value < 1) return "";
      return "must be a number in [0, 1), got " + text;
    },
    "X");

// An option's check (options.h) as CLI11's validator; the TOML key checks the same.
CLI::Validator validator_of(const train::Option& option) {
  switch (option.check) {
    case train::Check::kCount:
      return count_at_least(static_cast<int>(option.low));
    case train::Check::kRange:
      return CLI::Range(option.low, option.high);
    case train::Check::kUint64:
      return kUint64;
    case train::Check::kFiniteAboveZero: {
      // "number of GB" reads GB in the help, "norm" NORM.
      std::string name(option.unit.substr(option.unit.rfind(' ') + 1));
      for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      return finite_above_zero(std::string(option.unit), name);
    }
    case train::Check::kFiniteAtLeastZero:
      return finite_number(false, "X");
    case train::Check::kUnitInterval:
      return kUnitInterval;
    case train::Check::kNone:
      break;
  }
  return CLI::Validator();
}

// Sets the enum `option` of `c` from the name a flag gave.
void set_choice(const train::Option& option, const std::string& name, train::TrainConfig& c) {
  try {
    train::parse_choice(option, name, c);
  } catch (const Error& e) {
    throw Error(detail::concat("[train.config] ", e.what()));
  }
}

// Adds every option of the table: its flag, help and check, and how its
// value reaches the config when given.
void add_options(CLI::App* cmd, const std::shared_ptr<TrainFlags>& f) {
  for (const train::Option& option : train::options()) {
    CLI::Option* added = nullptr;
    if (option.is_switch) {
      added = cmd->add_flag(std::string(option.flag),
                            f->values.*std::get<bool train::TrainConfig::*>(option.member),
                            std::string(option.help));
    } else if (train::is_choice(option)) {
      // An enum: the name is parsed as the flag's value reaches the config.
      std::string& name = f->choice_names.emplace_back();
      added = cmd->add_option(std::string(option.flag), name, std::string(option.help));
      f->given.emplace_back(
          added, [&option, &name](train::TrainConfig& c) { set_choice(option, name, c); });
      continue;
    } else {
      std::visit(
          [&](auto member) {
            using T = std::decay_t<decltype(f->values.*member)>;
            if constexpr (!train::kIsChoice<T>) {
              added = cmd->add_option(std::string(option.flag), f->values.*member,
                                      std::string(option.help));
            }
          },
          option.member);
    }
    if (option.check != train::Check::kNone) added->check(validator_of(option));
    const train::Member member = option.member;
    TrainFlags* flags = f.get();
    f->given.emplace_back(added, [flags, member](train::TrainConfig& c) {
      std::visit([&](auto m) { c.*m = flags->values.*m; }, member);
    });
  }
}

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
  std::vector<std::string> paths{"--config"};
  for (const train::Option& option : train::options()) {
    if (option.is_path) paths.emplace_back(option.flag);
  }
  for (const std::string& name : paths) {
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

// The configuration the command line gives: the TOML file's, then each
// flag given, with the deprecated --checkpoint and a --schedule-file's
// micro-batch count.
train::TrainConfig config_of(TrainFlags& f, std::vector<std::string>& deprecations) {
  train::TrainConfig config;
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
    set_choice(*train::option_by_key("recompute"), f.checkpoint, config);
    deprecations.push_back("--checkpoint is deprecated, use --recompute");
  }
  if (!config.schedule_file.empty()) {
    BATON_CHECK(f.schedule_option->count() == 0 && f.virtual_option->count() == 0,
                "[train] --schedule-file gives the schedule; drop --schedule and --virtual");
    // The file decides the micro-batch count unless --microbatches says it (then they must agree).
    if (f.microbatches_option->count() == 0) {
      config.microbatches =
          schedule::lowered_schedule(schedule::ScheduleSource::from_file(config.schedule_file))
              .microbatches;
    }
  }
  return config;
}

// The ranks of this machine under comm::launch_local, restarted from the
// newest checkpoint up to --max-restarts times; the launch's exit code.
int launch_ranks(const train::TrainConfig& config, std::vector<std::string> argv, int nproc) {
  argv[0] = this_executable("[train]");
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

int run(TrainFlags& f) {
  check_given_once(*f.cmd);
  // Before the launcher's pipes or any output file could take descriptor 1.
  check_stdout_open("[train]");
  std::vector<std::string> deprecations;
  train::TrainConfig config = config_of(f, deprecations);
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
  train::check_memory_cap_before_start(config);
  if (nproc == 1) return run_rank(config, comm::RankEnv{});
  return launch_ranks(config, f.argv, nproc);
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
  add_options(cmd, f);
  f->recompute_option = cmd->get_option("--recompute");
  f->checkpoint_option =
      cmd->add_option("--checkpoint", f->checkpoint, "Deprecated: use --recompute");
  f->schedule_option = cmd->get_option("--schedule");
  f->virtual_option = cmd->get_option("--virtual");
  f->schedule_file_option = cmd->get_option("--schedule-file");
  f->microbatches_option = cmd->get_option("--microbatches");
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
