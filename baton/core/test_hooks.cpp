#include "baton/core/test_hooks.h"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace baton {
namespace {

struct Hook {
  bool parent = false;
  int rank = -1;
  long long step = -1;
  std::string marker;
};

std::vector<Hook> parse_hooks(const char* text) {
  std::vector<Hook> hooks;
  std::stringstream list(text);
  std::string entry;
  while (std::getline(list, entry, ',')) {
    Hook hook;
    hook.parent = !entry.empty() && entry[0] == '^';
    if (hook.parent) entry.erase(0, 1);
    int used = 0;
    if (std::sscanf(entry.c_str(), "%d:%lld%n", &hook.rank, &hook.step, &used) != 2) return {};
    if (used < static_cast<int>(entry.size())) {
      if (entry[used] != ':') return {};
      hook.marker = entry.substr(used + 1);
    }
    hooks.push_back(hook);
  }
  return hooks;
}

}  // namespace

bool hook_fires(const char* variable, int rank, int64_t step, bool* kill_parent) {
  const char* text = std::getenv(variable);
  if (text == nullptr) return false;
  const std::vector<Hook> hooks = parse_hooks(text);
  for (size_t k = 0; k < hooks.size(); ++k) {
    const Hook& hook = hooks[k];
    if (hook.rank != rank || hook.step != step) continue;
    bool earlier_fired = true;
    for (size_t j = 0; j < k; ++j)
      earlier_fired = earlier_fired &&
                      (hooks[j].marker.empty() || ::access(hooks[j].marker.c_str(), F_OK) == 0);
    if (!earlier_fired) continue;
    if (!hook.marker.empty()) {
      const int fd = ::open(hook.marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) continue;  // fired before
      ::close(fd);
    }
    if (kill_parent) *kill_parent = hook.parent;
    return true;
  }
  return false;
}

void kill_if_hooked(const char* variable, int rank, int64_t step) {
  bool parent = false;
  if (!hook_fires(variable, rank, step, &parent)) return;
  if (parent) ::kill(::getppid(), SIGKILL);
  std::raise(SIGKILL);
}

}  // namespace baton
