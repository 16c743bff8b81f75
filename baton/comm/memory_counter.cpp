#include "baton/comm/memory_counter.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

namespace baton::comm {
namespace {

thread_local MemoryCategory t_category = MemoryCategory::kOther;

struct Counts {
  std::atomic<int64_t> current{0};
  std::array<std::atomic<int64_t>, kMemoryCategories> by_category{};
  std::mutex peak_mutex;
  std::atomic<int64_t> peak{0};                      // raised under peak_mutex
  std::array<int64_t, kMemoryCategories> at_peak{};  // under peak_mutex
};

Counts& counts() {
  static Counts* c = new Counts();  // never destroyed: tensors outlive static destructors
  return *c;
}

void note_peak(Counts& c, int64_t now) {
  std::lock_guard<std::mutex> lock(c.peak_mutex);
  if (now <= c.peak.load()) return;
  c.peak.store(now);
  for (int k = 0; k < kMemoryCategories; ++k) c.at_peak[k] = c.by_category[k].load();
}

// Each block carries its charge and its deleter in a header before the
// data: LibTorch frees some blocks by their data pointer alone
// (Allocator::raw_allocate), so the data pointer must be the DataPtr's
// context; and the allocator below may change (set_memory_counter_source)
// while blocks of the old one live. 64 bytes keep the data at c10's 64-byte
// alignment.
constexpr size_t kHeaderBytes = 64;
struct Header {
  int64_t bytes;
  int32_t category;
  c10::DeleterFnPtr free;  // the allocator below's raw deleter
};
static_assert(sizeof(Header) <= kHeaderBytes);

std::atomic<c10::Allocator*> g_below{nullptr};

void release(void* data) {
  if (data == nullptr) return;
  void* raw = static_cast<char*>(data) - kHeaderBytes;
  const Header header = *static_cast<const Header*>(raw);
  Counts& c = counts();
  c.by_category[header.category].fetch_sub(header.bytes);
  c.current.fetch_sub(header.bytes);
  header.free(raw);
}

// LibTorch 2.3 made allocate() non-const.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define BATON_ALLOCATE_CONST
#else
#define BATON_ALLOCATE_CONST const
#endif

class CountingAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) BATON_ALLOCATE_CONST override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (n == 0) return c10::DataPtr(nullptr, nullptr, &release, cpu);
    // From the allocator below by its raw interface where it has one
    // (LibTorch's default and the huge-page allocator do), else c10's own.
    c10::Allocator* below = g_below.load();
    const c10::DeleterFnPtr below_free = below->raw_deleter();
    void* raw = nullptr;
    try {
      raw = below_free != nullptr ? below->raw_allocate(n + kHeaderBytes)
                                  : c10::alloc_cpu(n + kHeaderBytes);
    } catch (const c10::Error& e) {
      // Out of memory names the bytes the caller asked for, not the header's too.
      std::string what = e.msg();
      const std::string asked = std::to_string(n + kHeaderBytes);
      const size_t at = what.find(asked);
      if (at != std::string::npos) what.replace(at, asked.size(), std::to_string(n));
      TORCH_CHECK(false, what);
    }
    auto* header = static_cast<Header*>(raw);
    header->bytes = static_cast<int64_t>(n);
    header->category = static_cast<int32_t>(t_category);
    header->free = below_free != nullptr ? below_free : &c10::free_cpu;
    Counts& c = counts();
    c.by_category[header->category].fetch_add(header->bytes);
    const int64_t now = c.current.fetch_add(header->bytes) + header->bytes;
    if (now > c.peak.load(std::memory_order_relaxed)) note_peak(c, now);
    void* data = static_cast<char*>(raw) + kHeaderBytes;
    return c10::DataPtr(data, data, &release, cpu);
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  // LibTorch 2.x's Allocator asks for it; 1.13's has none (then an unused member).
  void copy_data(void* dest, const void* src, std::size_t count) const {
    std::memcpy(dest, src, count);
  }
};

std::atomic<bool> g_installed{false};

}  // namespace

const char* to_string(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kGradients:
      return "gradients";
    case MemoryCategory::kOptimizer:
      return "optimizer";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kBuffers:
      return "buffers";
    case MemoryCategory::kOther:
      return "other";
  }
  return "other";
}

void install_memory_counter() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_below = c10::GetCPUAllocator();
    // Never destroyed: the tensors it hands out may outlive every static.
    static auto* counter = new CountingAllocator();
    c10::SetCPUAllocator(counter, kMemoryCounterPriority);
    g_installed = true;
  });
}

void set_memory_counter_source(c10::Allocator* below) {
  g_below = below;
}

bool memory_counter_installed() {
  return g_installed;
}

MemoryFigures memory_figures() {
  MemoryFigures out;
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.peak_mutex);
  out.current_bytes = c.current.load();
  out.peak_bytes = c.peak.load();
  for (int k = 0; k < kMemoryCategories; ++k) {
    out.current[k] = c.by_category[k].load();
    out.at_peak[k] = c.at_peak[k];
  }
  return out;
}

void reset_memory_peak() {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.peak_mutex);
  c.peak.store(c.current.load());
  for (int k = 0; k < kMemoryCategories; ++k) c.at_peak[k] = c.by_category[k].load();
}

MemoryCategoryScope::MemoryCategoryScope(MemoryCategory category) : previous_(t_category) {
  t_category = category;
}

MemoryCategoryScope::~MemoryCategoryScope() {
  t_category = previous_;
}

}  // namespace baton::comm
