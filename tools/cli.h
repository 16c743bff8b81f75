// The `baton` command line: a thin layer over the library. Each subcommand
// registers its flags on a CLI11 app and runs when selected.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace baton::cli {

// The process's arguments as main() received them (argv[0] first).
const std::vector<std::string>& command_line();

// Writes "baton: error: <message>" (and a final newline if missing) to stderr
// in one write(2), so the line is never cut or interleaved.
void print_error(const std::string& message);

// A flag's check for a finite number: > 0 when `positive`, else >= 0; its
// error names the text given. (CLI11's NonNegativeNumber names its upper
// bound, the largest double, with all 309 digits.) `type` is the help's name
// for the value, e.g. "TIME". tools/validators.cpp.
CLI::Validator finite_number(bool positive, const std::string& type);
// A number in (0, 1]: "must be a number in (0, 1], got 1.5".
CLI::Validator fraction();

// A repeated option (`--pp 2 --pp 3`), which CLI11 reports as "At Most 1
// required but received 2", as one line naming it: take_repeated_options()
// lets CLI11 accept it (call it before adding options), check_given_once()
// then throws baton::Error "[<command>] --pp given more than once". Flags
// without a value (--json) may repeat. tools/repeated_options.cpp.
void take_repeated_options(CLI::App* cmd);
void check_given_once(const CLI::App& cmd);

// Replaces this process (execv) by `executable` from this executable's
// folder with the same arguments; returns only to throw baton::Error naming
// the path, the system's reason and `why`. tools/forward.cpp.
int run_beside(const std::string& executable, const std::string& why);

// A subcommand's action, run after parsing; returns the process exit code.
using Action = std::function<int()>;

// Each adds its subcommand to `app` and returns what to run when chosen.
Action add_simulate(CLI::App& app);
Action add_plan(CLI::App& app);  // tools/plan_command.cpp
// tools/torch/train_command.cpp in baton-train; in baton, tools/front/ runs
// baton-train (LibTorch builds) or tools/no_torch/ says it is not built.
Action add_train(CLI::App& app);
// tools/data/data_command.cpp in baton; in baton-train, tools/torch/ runs baton.
Action add_data(CLI::App& app);

}  // namespace baton::cli
