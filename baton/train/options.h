// The settings of `baton train`, each declared once (options.cpp). From this
// table come the CLI's flags and their checks (tools/torch/train_command.cpp),
// the TOML reader and its checks (config.cpp), the --emit-config writer
// (config_toml), the checkpoint's record of the run and the resume comparison
// (checkpoint_flags.cpp), and docs/cli.md's table is checked against it
// (tests/train/options_test.cpp). Adding a setting is one entry here plus the
// code that uses it. Torch-free. The closed choices (precision, recompute,
// optimizer, lr schedule, transport) are enums in TrainConfig, parsed from
// their names once, where a flag or TOML key is read (parse_choice). The
// model, the schedule (a registry name; the schedule carries its properties
// as data), the balance (a method or layer counts) and the device (cuda:N)
// stay strings, checked by check_config.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "baton/train/config.h"

namespace baton::train {

// What a value must be; the flag and the TOML key check the same.
enum class Check {
  kNone,
  kCount,              // an integer of at least `low`
  kRange,              // an integer in [low, high]
  kUint64,             // an integer in [0, 2^64)
  kFiniteAboveZero,    // a finite `unit` above 0; leaving it out is `off`
  kFiniteAtLeastZero,  // a finite number, at least 0
  kUnitInterval,       // a number in [0, 1)
};

// What a checkpoint records of the setting, and what a resume may change.
enum class Resume {
  kFree,      // not recorded: a resume may change it
  kRecorded,  // recorded, a resume may change it
  kModel,     // recorded; a resume must agree (the model's shapes)
  kAllowed,   // recorded; a change needs --allow-resume-change NAME (NAME: the flag without --)
};

using Member = std::variant<std::string TrainConfig::*, int TrainConfig::*, double TrainConfig::*,
                            bool TrainConfig::*, uint64_t TrainConfig::*, Precision TrainConfig::*,
                            Recompute TrainConfig::*, Optimizer TrainConfig::*,
                            LrSchedule TrainConfig::*, TransportKind TrainConfig::*>;

// Whether `T` is a member type of the closed choices (an enum of core/choices.h).
template <typename T>
inline constexpr bool kIsChoice = std::is_enum_v<T>;

struct Option {
  std::string_view flag;  // "--bucket-mb"
  std::string_view key;   // "bucket_mb"
  Member member;
  std::string_view help;  // the flag's help line
  Check check = Check::kNone;
  int64_t low = 0;
  int64_t high = 0;
  std::string_view unit;  // kFiniteAboveZero: "norm", "number of GB"
  std::string_view off;   // kFiniteAboveZero: what leaving it out means ("no clipping")
  Resume resume = Resume::kFree;
  bool is_switch = false;  // on the command line a bare flag (--step-barrier), in TOML a bool
  bool is_path = false;    // a file or folder: an empty value is refused
  // A string's accepted values; {} for any. The schedule's come from the
  // registry (schedule::schedule_names), an enum's from its type.
  std::vector<std::string_view> choices;
};

// Every setting, in the order `baton train --help` lists them.
const std::vector<Option>& options();

// The option with this TOML key, or nullptr.
const Option* option_by_key(std::string_view key);

// The accepted values of `option` ({} for any): its choices, the schedule
// registry's names for --schedule, or an enum's names.
std::vector<std::string> choices_of(const Option& option);

// Whether `option`'s member is an enum (a closed choice).
bool is_choice(const Option& option);

// Sets `config`'s value of the enum option `option` from its name, as a flag
// or TOML key gives it. Throws baton::Error without a tag: "unknown
// precision \"x\" (expected fp32, bf16 or fp16)"; the caller says where.
void parse_choice(const Option& option, std::string_view name, TrainConfig& config);

// What is wrong with `config`'s value of `option` by its check and its
// choices ("must be in [0, 1), got 1", "unknown lr schedule \"x\"
// (expected constant or cosine)"), or "" when nothing is.
std::string option_problem(const Option& option, const TrainConfig& config);

// Whether `config` holds TrainConfig's default for `option` (a default is
// valid: 0 often stands for "not given").
bool at_default(const Option& option, const TrainConfig& config);

// A TOML file setting `keys` (TOML keys of options()) to `config`'s values,
// one per line in that order, after `header`'s lines as comments. Throws
// baton::Error for a key that is not an option's.
std::string config_toml(const TrainConfig& config, const std::vector<std::string>& keys,
                        const std::string& header = {});

// The --allow-resume-change names: the kAllowed options' flags without
// "--", then "data" (the corpus's identity).
std::vector<std::string> resume_change_names();

}  // namespace baton::train
