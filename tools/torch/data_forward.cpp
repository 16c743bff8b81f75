// `data` in baton-train: runs `baton`, the torch-free command line beside it.
// Debian's LibTorch links protobuf, SentencePiece links protobuf-lite, and a
// process that loads both crashes before main() while the two register the
// same descriptors; so SentencePiece lives only in `baton` (docs/architecture.md).
#include "tools/cli.h"

namespace baton::cli {

Action add_data(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "data", "Prepare and inspect tokenized datasets (runs baton, beside this baton-train)");
  cmd->prefix_command();  // every argument goes to baton as it is
  cmd->set_help_flag();   // --help too
  return [] {
    return run_beside("baton", "[data] runs in baton, built and installed beside baton-train");
  };
}

}  // namespace baton::cli
