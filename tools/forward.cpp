// Runs a sibling executable in place of this process (execv: the same pid,
// environment and exit status), with this process's arguments, argv[0] too.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "baton/core/executable.h"
#include "tools/cli.h"

namespace baton::cli {

int run_beside(const std::string& executable, const std::string& why) {
  const std::string here = this_executable("[" + executable + "]");
  const std::string path = here.substr(0, here.rfind('/') + 1) + executable;
  std::vector<std::string> args = command_line();  // argv[0] as given: help says "baton train"
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  execv(path.c_str(), argv.data());
  BATON_CHECK(false, "cannot run ", path, ": ", std::strerror(errno), "; ", why);
  return 2;
}

}  // namespace baton::cli
