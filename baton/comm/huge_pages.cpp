#include "baton/comm/huge_pages.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "baton/comm/memory_counter.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kPage = 4096;
constexpr std::size_t kSmallAlignment = 64;  // LibTorch's gAlignment

std::size_t env_size(const char* name, std::size_t fallback, std::size_t high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  BATON_CHECK(errno == 0 && *end == '\0' && value <= high, "[comm.huge_pages] ", name,
              " must be an integer in [0, ", high, "], got \"", text, "\"");
  return static_cast<std::size_t>(value);
}

// The kernel's transparent huge page mode: "always", "madvise" or "never"
// (the bracketed word of /sys/kernel/mm/transparent_hugepage/enabled).
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text;
  std::getline(in, text);
  const auto open = text.find('['), close = text.find(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return "never";
  return text.substr(open + 1, close - open - 1);
}

class HugePageAllocator final : public c10::Allocator {
 public:
  explicit HugePageAllocator(const HugePageOptions& options) : options_(options) {}

  // LibTorch 1.13 declares allocate() const, 2.x non-const; this class has
  // both and marks neither override, so it builds against either.
  c10::DataPtr allocate(std::size_t n) const {
    void* data = instance()->take(n);
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DataPtr allocate(std::size_t n) {
    return static_cast<const HugePageAllocator*>(this)->allocate(n);
  }
  c10::DeleterFnPtr raw_deleter() const { return &release; }
  // LibTorch 2.x's Allocator::copy_data (absent from 1.13).
  void copy_data(void* dest, const void* src, std::size_t count) const {
    if (count > 0) std::memcpy(dest, src, count);
  }

  static HugePageAllocator* instance() { return instance_; }
  static void set_instance(HugePageAllocator* a) { instance_ = a; }

  HugePageStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

 private:
  static void release(void* data) { instance()->give_back(data); }

  // The error LibTorch's own allocator raises, with the same words, which
  // callers (nn/layer_spec.cpp) read the bytes from.
  [[noreturn]] static void out_of_memory(std::size_t n, int error) {
    TORCH_CHECK(false, "HugePageAllocator: can't allocate memory: you tried to allocate ", n,
                " bytes. Error code ", error, " (", std::strerror(error), ")");
  }

  void* take(std::size_t n) {
    if (n < options_.threshold) {
      void* data = nullptr;
      // posix_memalign(0) may return nullptr; LibTorch's allocator asks for 1 byte too.
      const int error = posix_memalign(&data, kSmallAlignment, n == 0 ? 1 : n);
      if (error != 0) out_of_memory(n, error);
      return data;
    }
    // Whole 4 KiB pages: the kernel backs the 2 MiB-aligned ranges that lie
    // inside the buffer with huge pages and the tail with small ones, so no
    // buffer holds more than 4 KiB it did not ask for.
    const std::size_t size = (n + kPage - 1) / kPage * kPage;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        void* data = it->second;
        free_.erase(it);
        stats_.cached_bytes -= size;
        ++stats_.reused;
        live_[data] = size;
        return data;
      }
    }
    // Map one huge page more than needed, then cut the ends off so that the
    // buffer starts on a 2 MiB boundary.
    const std::size_t span = size + kHugePage;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) out_of_memory(n, errno);
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const std::uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    const std::uintptr_t end = start + span, used_end = aligned + size;
    if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
    void* data = reinterpret_cast<void*>(aligned);
    madvise(data, size, MADV_HUGEPAGE);  // advice: a refusal leaves 4 KiB pages, still correct
    std::lock_guard<std::mutex> lock(mutex_);
    live_[data] = size;
    ++stats_.mapped;
    return data;
  }

  void give_back(void* data) {
    if (data == nullptr) return;
    std::size_t size = 0;
    if (reinterpret_cast<std::uintptr_t>(data) % kHugePage == 0) {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(data);
      if (it != live_.end()) {
        size = it->second;
        live_.erase(it);
        if (stats_.cached_bytes + size <= options_.cache_bytes) {
          free_.emplace(size, data);
          stats_.cached_bytes += size;
          return;
        }
      }
    }
    if (size > 0) {
      munmap(data, size);
    } else {
      std::free(data);  // a small buffer, 64-byte aligned by chance or not
    }
  }

  static HugePageAllocator* instance_;
  const HugePageOptions options_;
  std::mutex mutex_;
  std::unordered_map<void*, std::size_t> live_;  // huge buffers in use
  std::multimap<std::size_t, void*> free_;       // huge buffers kept, by size
  HugePageStats stats_;
};

HugePageAllocator* HugePageAllocator::instance_ = nullptr;

}  // namespace

HugePageOptions HugePageOptions::from_env() {
  HugePageOptions options;
  options.enabled = env_size("BATON_HUGE_PAGES", 1, 1) == 1 && thp_mode() != "never";
  options.cache_bytes =
      env_size("BATON_HUGE_PAGE_CACHE_MB", options.cache_bytes >> 20, std::size_t{1} << 30) << 20;
  return options;
}

bool install_huge_page_allocator(const HugePageOptions& options) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (HugePageAllocator::instance() != nullptr) return true;
  if (!options.enabled) return false;
  // Leaked on purpose: buffers it handed out may be freed at exit, after
  // every static destructor.
  auto* allocator = new HugePageAllocator(options);
  HugePageAllocator::set_instance(allocator);
  // Under the counter when it counts this process (memory_counter.h).
  if (memory_counter_installed()) {
    set_memory_counter_source(allocator);
  } else {
    c10::SetCPUAllocator(allocator, /*priority=*/1);
  }
  return true;
}

HugePageStats huge_page_stats() {
  HugePageAllocator* allocator = HugePageAllocator::instance();
  return allocator != nullptr ? allocator->stats() : HugePageStats{};
}

}  // namespace baton::comm
