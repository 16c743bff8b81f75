// `baton train` in a LibTorch build: runs baton-train, the command line with
// LibTorch built beside baton, with the same arguments. A process that loads
// LibTorch spends 0.4-1 s registering its operators before main(); `baton`
// itself links no LibTorch, so `simulate`, `plan` and `data` start at once
// (docs/architecture.md).
#include "tools/cli.h"

namespace baton::cli {

Action add_train(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "train", "Train a model with pipeline parallelism (runs baton-train, beside this baton)");
  cmd->prefix_command();  // every argument goes to baton-train as it is
  cmd->set_help_flag();   // --help too: baton-train prints the flags
  return [] {
    return run_beside("baton-train",
                      "[train] runs in baton-train, built and installed beside baton");
  };
}

}  // namespace baton::cli
