#include "baton/core/executable.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "baton/core/error.h"

namespace baton {

std::string this_executable(const std::string& where) {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  BATON_CHECK(n > 0, where,
              " cannot find this executable (/proc/self/exe): ", std::strerror(errno));
  return std::string(path, static_cast<size_t>(n));
}

}  // namespace baton
