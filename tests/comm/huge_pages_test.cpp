#include "baton/comm/huge_pages.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baton/core/error.h"

namespace baton::comm {
namespace {

constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;

// kB of AnonHugePages in the mapping of /proc/self/smaps that holds `address`.
long anon_huge_kb(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t low = 0, high = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> low >> dash >> high && dash == '-') {
      inside = low <= at && at < high;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stol(line.substr(line.find(':') + 1));
    }
  }
  return -1;
}

class HugePagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HugePageOptions::from_env().enabled) {
      GTEST_SKIP() << "transparent huge pages are \"never\" on this kernel";
    }
    ASSERT_TRUE(install_huge_page_allocator(HugePageOptions::from_env()));
  }
};

TEST_F(HugePagesTest, LargeTensorsStartOnA2MiBBoundaryAndAreBackedByHugePages) {
  at::Tensor t = at::empty({(int64_t{6} << 20) / 4}, at::kFloat);  // 6 MiB
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % kHugePage, 0u);
  t.fill_(1.5);
  // The kernel may decline a huge page under memory pressure; with 6 MiB
  // touched on a machine with free memory, it backs at least one.
  EXPECT_GE(anon_huge_kb(t.data_ptr()), 2048);
  EXPECT_EQ(t.sum().item<double>(), 1.5 * static_cast<double>(t.numel()));
}

TEST_F(HugePagesTest, AFreedBufferServesTheNextAllocationOfItsSize) {
  const int64_t numel = (int64_t{3} << 20) / 4 + 5;  // 3 MiB + 20 bytes: rounded to 4 KiB
  const HugePageStats before = huge_page_stats();
  void* first = nullptr;
  {
    at::Tensor t = at::empty({numel}, at::kFloat);
    first = t.data_ptr();
    EXPECT_EQ(huge_page_stats().mapped, before.mapped + 1);
  }
  const std::uint64_t kept = (static_cast<std::uint64_t>(numel) * 4 + 4095) / 4096 * 4096;
  EXPECT_EQ(huge_page_stats().cached_bytes, before.cached_bytes + kept);
  at::Tensor again = at::empty({numel}, at::kFloat);
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(huge_page_stats().reused, before.reused + 1);
  EXPECT_EQ(huge_page_stats().mapped, before.mapped + 1);
  EXPECT_EQ(huge_page_stats().cached_bytes, before.cached_bytes);
}

TEST_F(HugePagesTest, SmallTensorsAre64ByteAlignedAndNeverCached) {
  const HugePageStats before = huge_page_stats();
  for (int64_t numel : {int64_t{0}, int64_t{1}, int64_t{1000}, (int64_t{2} << 20) / 4 - 1}) {
    at::Tensor t = at::zeros({numel}, at::kFloat);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 64, 0u) << numel;
  }
  EXPECT_EQ(huge_page_stats().mapped, before.mapped);
  EXPECT_EQ(huge_page_stats().cached_bytes, before.cached_bytes);
}

TEST_F(HugePagesTest, RawAllocationsFreeThroughTheRawDeleter) {
  c10::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  const HugePageStats before = huge_page_stats();
  void* big = allocator->raw_allocate(std::size_t{5} << 20);
  void* small = allocator->raw_allocate(100);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big) % kHugePage, 0u);
  allocator->raw_deleter()(big);
  allocator->raw_deleter()(small);
  EXPECT_EQ(huge_page_stats().cached_bytes, before.cached_bytes + (std::uint64_t{5} << 20));
}

TEST_F(HugePagesTest, ComputationOnHugeBuffersMatchesTheSameOnSmallOnes) {
  at::manual_seed(3);
  at::Tensor a = at::randn({1024, 1024}), b = at::randn({1024, 1024});  // 4 MiB each
  at::Tensor small_a = a.slice(0, 0, 16).clone(), small_b = b.slice(1, 0, 16).clone();
  // The same 16 x 16 corner from buffers under and over the threshold.
  at::Tensor corner = at::matmul(a, b).slice(0, 0, 16).slice(1, 0, 16);
  at::Tensor reference = at::matmul(small_a, small_b);
  EXPECT_TRUE(at::allclose(corner, reference, 1e-5, 1e-4));
}

TEST(HugePageOptionsTest, BadEnvironmentValuesNameTheVariable) {
  setenv("BATON_HUGE_PAGES", "2", 1);
  EXPECT_THAT([] { HugePageOptions::from_env(); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("BATON_HUGE_PAGES")));
  setenv("BATON_HUGE_PAGES", "0", 1);
  EXPECT_FALSE(HugePageOptions::from_env().enabled);
  unsetenv("BATON_HUGE_PAGES");
  setenv("BATON_HUGE_PAGE_CACHE_MB", "lots", 1);
  EXPECT_THAT([] { HugePageOptions::from_env(); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("BATON_HUGE_PAGE_CACHE_MB")));
  setenv("BATON_HUGE_PAGE_CACHE_MB", "64", 1);
  EXPECT_EQ(HugePageOptions::from_env().cache_bytes, std::size_t{64} << 20);
  unsetenv("BATON_HUGE_PAGE_CACHE_MB");
}

}  // namespace
}  // namespace baton::comm
