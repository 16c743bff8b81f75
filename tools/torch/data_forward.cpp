// `baton data` in a LibTorch build: runs baton-data, the torch-free CLI built
// beside baton, with the same arguments. Debian's LibTorch links protobuf,
// SentencePiece links protobuf-lite, and a process that loads both crashes
// before main() while the two register the same descriptors; so SentencePiece
// lives only in baton-data (docs/architecture.md, tools/).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "baton/comm/launcher.h"
#include "baton/core/error.h"
#include "tools/cli.h"

namespace baton::cli {

Action add_data(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "data", "Prepare and inspect tokenized datasets (runs baton-data, beside this baton)");
  cmd->prefix_command();  // every argument goes to baton-data as it is
  return [] {
    std::vector<const char*> given;
    for (const std::string& a : command_line()) given.push_back(a.c_str());
    // This executable, resolved as the launcher resolves it, with the same arguments.
    std::vector<std::string> args =
        comm::self_command(static_cast<int>(given.size()), given.data());
    const std::string path = args[0].substr(0, args[0].rfind('/') + 1) + "baton-data";
    args[0] = path;
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(path.c_str(), argv.data());
    BATON_CHECK(false, "[data] cannot run ", path, ": ", std::strerror(errno),
                "; baton data runs in baton-data, built and installed beside baton");
    return 2;
  };
}

}  // namespace baton::cli
