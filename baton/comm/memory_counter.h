// Every byte the CPU allocator hands out, counted: a wrapper installed with
// c10::SetCPUAllocator over the allocator in use, keeping the current and the
// peak bytes, exactly (the sizes asked for), and by category: each
// allocation is charged to the category of the MemoryCategoryScope open on
// its thread when it was made, and returned to it when freed.
//
// Process-wide: one rank is one process, so these are the rank's figures
// (ranks run as threads in tests share them). Tensors allocated before
// install_memory_counter() are not counted, nor freed from the counts.
// Thread-safe; with several threads allocating, the by-category figures at
// the peak are read just after it, not at its instant. On CUDA the caching allocator's own
// statistics serve instead (torch.cuda's memory statistics).
#pragma once

#include <c10/core/Allocator.h>

#include <array>
#include <cstdint>
#include <string>

namespace baton::comm {

enum class MemoryCategory : int {
  kParameters,   // weights and buffers of the layers
  kGradients,    // what a backward allocates: parameter gradients, input gradients
  kOptimizer,    // the optimizer's state and step
  kActivations,  // what a forward allocates: tensors autograd keeps, casts, outputs
  kBuffers,      // messages received, reductions' buckets
  kOther,        // anything outside a scope (data, the loss, the caller's tensors)
};
inline constexpr int kMemoryCategories = 6;
// "parameters", "gradients", "optimizer", "activations", "buffers", "other".
const char* to_string(MemoryCategory category);

struct MemoryFigures {
  int64_t current_bytes = 0;
  int64_t peak_bytes = 0;
  // By MemoryCategory: what each holds now, and held at the peak.
  std::array<int64_t, kMemoryCategories> current = {};
  std::array<int64_t, kMemoryCategories> at_peak = {};
};

// Installs the counter over c10's CPU allocator (the one in use becomes the
// source of its blocks), at a priority above every other of baton's; later
// calls do nothing.
void install_memory_counter();
bool memory_counter_installed();
inline constexpr uint8_t kMemoryCounterPriority = 2;

// With the counter installed: the allocator its blocks come from from now on
// (how the huge-page allocator, huge_pages.h, goes under it). Blocks from the
// previous source are still freed by it.
void set_memory_counter_source(c10::Allocator* below);

// The counts now (zeros before install_memory_counter()).
MemoryFigures memory_figures();

// Starts a new peak from what is held now (e.g. at steady state).
void reset_memory_peak();

// Charges this thread's allocations to `category` while in scope (scopes nest).
class MemoryCategoryScope {
 public:
  explicit MemoryCategoryScope(MemoryCategory category);
  ~MemoryCategoryScope();
  MemoryCategoryScope(const MemoryCategoryScope&) = delete;
  MemoryCategoryScope& operator=(const MemoryCategoryScope&) = delete;

 private:
  MemoryCategory previous_;
};

}  // namespace baton::comm
