// The counting allocator against tensors of known size: exact bytes, a peak
// that stays when its tensor is freed, categories charged where allocated and
// returned where freed, and exact sums over threads.
#include "baton/comm/memory_counter.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>
#include <vector>

namespace baton::comm {
namespace {

class MemoryCounter : public testing::Test {
 protected:
  void SetUp() override { install_memory_counter(); }
};

TEST_F(MemoryCounter, CountsTheBytesOfEachTensorExactly) {
  ASSERT_TRUE(memory_counter_installed());
  const int64_t before = memory_figures().current_bytes;
  torch::Tensor floats = torch::empty({1000}, torch::kFloat32);
  EXPECT_EQ(memory_figures().current_bytes - before, 4000);
  torch::Tensor halves = torch::empty({7, 3}, torch::kBFloat16);
  EXPECT_EQ(memory_figures().current_bytes - before, 4000 + 42);
  floats = torch::Tensor();
  halves = torch::Tensor();
  EXPECT_EQ(memory_figures().current_bytes, before);
}

TEST_F(MemoryCounter, APeakStaysAfterItsTensorIsFreedUntilReset) {
  reset_memory_peak();
  const int64_t base = memory_figures().current_bytes;
  EXPECT_EQ(memory_figures().peak_bytes, base);
  {
    torch::Tensor big = torch::empty({250000}, torch::kFloat32);  // 1,000,000 bytes
    EXPECT_EQ(memory_figures().peak_bytes - base, 1000000);
  }
  EXPECT_EQ(memory_figures().current_bytes, base);
  EXPECT_EQ(memory_figures().peak_bytes - base, 1000000);
  torch::Tensor small = torch::empty({10}, torch::kFloat32);
  EXPECT_EQ(memory_figures().peak_bytes - base, 1000000);  // below the peak: unchanged
  reset_memory_peak();
  EXPECT_EQ(memory_figures().peak_bytes, base + 40);
}

TEST_F(MemoryCounter, ChargesTheScopesCategoryAndReturnsItThereWhenFreed) {
  const auto activations = static_cast<int>(MemoryCategory::kActivations);
  const auto other = static_cast<int>(MemoryCategory::kOther);
  const MemoryFigures before = memory_figures();
  torch::Tensor kept;
  {
    MemoryCategoryScope scope(MemoryCategory::kActivations);
    kept = torch::empty({100}, torch::kFloat64);
  }
  torch::Tensor outside = torch::empty({5}, torch::kFloat32);
  MemoryFigures now = memory_figures();
  EXPECT_EQ(now.current[activations] - before.current[activations], 800);
  EXPECT_EQ(now.current[other] - before.current[other], 20);
  kept = torch::Tensor();  // freed outside the scope: still returned to activations
  now = memory_figures();
  EXPECT_EQ(now.current[activations], before.current[activations]);
  EXPECT_STREQ(to_string(MemoryCategory::kOptimizer), "optimizer");
}

TEST_F(MemoryCounter, SumsExactlyOverThreadsAllocatingAtOnce) {
  const int64_t before = memory_figures().current_bytes;
  constexpr int kThreads = 8, kTensors = 100;
  std::vector<std::vector<torch::Tensor>> held(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      MemoryCategoryScope scope(MemoryCategory::kBuffers);
      for (int i = 0; i < kTensors; ++i) held[t].push_back(torch::empty({250}, torch::kFloat32));
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(memory_figures().current_bytes - before, int64_t{kThreads} * kTensors * 1000);
  EXPECT_GE(memory_figures().peak_bytes, memory_figures().current_bytes);
  held.clear();
  EXPECT_EQ(memory_figures().current_bytes, before);
}

}  // namespace
}  // namespace baton::comm
