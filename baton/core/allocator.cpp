#include "baton/core/allocator.h"

#include <cstdlib>
#include <cstring>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace baton {

bool user_tunes_malloc(const char* glibc_tunables) {
  return glibc_tunables != nullptr && std::strstr(glibc_tunables, "glibc.malloc.") != nullptr;
}

bool keep_freed_memory() {
#if defined(__GLIBC__)
  if (user_tunes_malloc(std::getenv("GLIBC_TUNABLES"))) return false;
  // The trim threshold first: each call turns glibc's own raising of the
  // thresholds off, and both are set here.
  const bool trim = mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrimThreshold)) == 1;
  const bool mmap = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold)) == 1;
  return trim && mmap;
#else
  return false;
#endif
}

}  // namespace baton
