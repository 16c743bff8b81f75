#include "baton/comm/host_identity.h"

#include <unistd.h>

#include <climits>
#include <fstream>

#include "baton/core/error.h"

namespace baton::comm::detail {
namespace {

std::string read_link(const char* path) {
  char buffer[PATH_MAX];
  const ssize_t n = readlink(path, buffer, sizeof(buffer) - 1);
  return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string("?");
}

}  // namespace

std::string host_identity() {
  std::string boot_id;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, boot_id);
  if (boot_id.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    boot_id = name;
  }
  return ::baton::detail::concat(
      boot_id, "|", read_link("/proc/self/ns/mnt"), "|", read_link("/proc/self/ns/ipc"), "|",
      read_link("/proc/self/ns/pid"), "|", read_link("/proc/self/ns/net"));
}

std::vector<bool> same_host_ranks(c10d::Store& store, const std::string& prefix, int rank,
                                  int world_size) {
  const std::string mine = host_identity();
  store.set(prefix + std::to_string(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<bool> same(static_cast<size_t>(world_size), false);
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) {
      same[r] = true;
      continue;
    }
    const std::vector<uint8_t> theirs = store.get(prefix + std::to_string(r));
    same[r] = std::string(theirs.begin(), theirs.end()) == mine;
  }
  return same;
}

}  // namespace baton::comm::detail
