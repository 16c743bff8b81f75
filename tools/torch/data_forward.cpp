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

#include "baton/core/error.h"
#include "tools/cli.h"

namespace baton::cli {

Action add_data(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "data", "Prepare and inspect tokenized datasets (runs baton-data, beside this baton)");
  cmd->prefix_command();  // every argument goes to baton-data as it is
  return [] {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    BATON_CHECK(n > 0, "[data] cannot find this executable: ", std::strerror(errno));
    self[n] = '\0';
    std::string path(self);
    path = path.substr(0, path.rfind('/') + 1) + "baton-data";
    std::vector<std::string> args = command_line();
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
