// Stand-in for `baton train` until the torch runtime is built into the CLI.
#include "baton/core/error.h"
#include "tools/cli.h"

namespace baton::cli {

Action add_train(CLI::App& app) {
  app.add_subcommand("train", "Train a model with pipeline parallelism (needs the torch build)")
      ->allow_extras();
  return [] {
    BATON_CHECK(false, "[train] this baton was built without LibTorch");
    return 1;
  };
}

}  // namespace baton::cli
