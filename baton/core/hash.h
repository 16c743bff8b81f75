// Seed mixing shared by everything that derives seeds (layer init, data order).
#pragma once

#include <cstdint>

namespace baton {

// SplitMix64's finalizer: nearby inputs give unrelated outputs.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace baton
