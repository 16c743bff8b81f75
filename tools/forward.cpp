// Runs a sibling executable in place of this process (execv: the same pid,
// environment and exit status), with this process's arguments, argv[0] too.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "baton/core/error.h"
#include "tools/cli.h"

namespace baton::cli {

int run_beside(const std::string& executable, const std::string& why) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  BATON_CHECK(n > 0, "cannot find this executable (/proc/self/exe): ", std::strerror(errno));
  self[n] = '\0';
  const std::string here(self);
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
