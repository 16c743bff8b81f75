// LibTorch's CPU allocator, with large buffers on transparent huge pages.
//
// Why: the shared-memory transport moves a large payload with one
// process_vm_readv out of the sender's tensor, and the kernel pins the
// sender's pages one by one. On 4 KiB pages that pinning, not the copy, sets
// the speed: 3.1-3.4 GB/s measured here for 16 and 64 MiB, against 8.4-8.8
// GB/s when the sender's buffer is on 2 MiB pages (and 10 GB/s when both
// are), and 6.7-8 GB/s for a plain memcpy (bench/RESULTS.md, "Large
// messages"). LibTorch 1.13's allocator has no huge-page mode (2.x has
// THP_MEM_ALLOC_ENABLE), so baton brings its own.
//
// What: allocations of at least 2 MiB are mmap'd 2 MiB-aligned with
// madvise(MADV_HUGEPAGE) (whole 2 MiB pages, then 4 KiB pages for the
// tail), and freed ones are kept by size for reuse, so the
// steady state faults no pages (glibc's heap gives LibTorch's allocator the
// same reuse). At most `cache_bytes` of free buffers are kept; beyond that a
// freed buffer is unmapped. Smaller allocations are 64-byte aligned from
// malloc, as LibTorch's own. Every buffer frees through one raw deleter.
//
// Decision: installed for the whole process (c10::SetCPUAllocator) by a rank
// that has a shared-memory peer, because the buffers that cross are the
// user's own activations, allocated anywhere in LibTorch. BATON_HUGE_PAGES=0
// keeps LibTorch's allocator; so does a kernel whose transparent huge pages
// are "never". The allocator is never uninstalled: tensors allocated from it
// may outlive everything else.
#pragma once

#include <cstddef>
#include <cstdint>

namespace baton::comm {

struct HugePageOptions {
  std::size_t threshold = std::size_t{2} << 20;    // from here on, huge pages
  std::size_t cache_bytes = std::size_t{1} << 30;  // env BATON_HUGE_PAGE_CACHE_MB
  // BATON_HUGE_PAGES (0 or 1, default 1) and BATON_HUGE_PAGE_CACHE_MB;
  // throws on bad values. `enabled` is false also where the kernel's
  // transparent huge pages are "never".
  bool enabled = true;
  static HugePageOptions from_env();
};

// Installs the allocator once per process (later calls change nothing) when
// `options.enabled`; true when it is installed (now or before).
bool install_huge_page_allocator(const HugePageOptions& options);

// Counters of the installed allocator (all 0 before it is installed).
struct HugePageStats {
  std::uint64_t mapped = 0;        // huge buffers mmap'd
  std::uint64_t reused = 0;        // huge allocations served from the cache
  std::uint64_t cached_bytes = 0;  // free huge buffers kept now
};
HugePageStats huge_page_stats();

}  // namespace baton::comm
