// How glibc's malloc keeps freed memory. LibTorch's CPU tensors come from
// malloc. With glibc's defaults, a block above the mmap threshold (128 KiB,
// raised by glibc up to 32 MiB as such blocks are freed) is mapped fresh from
// the kernel, and free memory above the trim threshold (twice the mmap
// threshold) at the heap's top goes back to the kernel. A training step frees
// its activations and the optimizer's temporaries and allocates them again
// the next step, so each step faulted in and zeroed the same pages again:
// Adam's step on an MLP of 8 x 512 x 512 took 6.7-8.0 ms, and a run of 30
// steps had 127,000 page faults; with the thresholds raised 3.8-4.7 ms and
// 42,600 (bench/RESULTS.md, "Memory a step frees").
//
// Decision: the CLI raises both thresholds first in main(), so freed blocks
// stay in the process for the next step (PyTorch's CPU performance guides
// reach for jemalloc or tcmalloc for the same reason; these two calls need
// nothing installed). The cost is memory that a step freed staying mapped up
// to the next step's peak: the process's peak RSS, not its steady use, and
// at most kTrimThreshold free at the heap's top. A library user calls
// keep_freed_memory() first in main() to get the same.
#pragma once

#include <cstddef>

namespace baton {

// Blocks below this come from the heap, not a fresh mapping.
constexpr size_t kMmapThreshold = size_t{256} << 20;
// Free memory at the heap's top is given back to the kernel above this.
constexpr size_t kTrimThreshold = size_t{512} << 20;

// True where the user tunes glibc's malloc already: `glibc_tunables` (the
// GLIBC_TUNABLES variable, or null) names a glibc.malloc tunable.
bool user_tunes_malloc(const char* glibc_tunables);

// Raises glibc's mmap and trim thresholds to kMmapThreshold and
// kTrimThreshold, unless the user tunes malloc (GLIBC_TUNABLES names a
// glibc.malloc tunable) or the C library is not glibc. Returns whether it did.
// Safe at any time; it affects the allocations that follow.
bool keep_freed_memory();

}  // namespace baton
