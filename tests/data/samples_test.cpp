// The sample rule of baton/data/samples.h: each epoch is a permutation of the
// windows, the same for a seed on every call, every window inside the
// stream; and the dp shares of a batch are disjoint with the batch as union.
#include "baton/data/samples.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "tests/data/data_files.h"

namespace baton::data {
namespace {

using testing_files::error_of;

std::vector<int64_t> epoch_windows(const SampleOrder& order, int64_t epoch) {
  std::vector<int64_t> windows;
  const int64_t per_epoch = order.samples_per_epoch();
  for (int64_t i = 0; i < per_epoch; ++i) windows.push_back(order.window_of(epoch * per_epoch + i));
  return windows;
}

class SampleOrders : public testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(SampleOrders, EachEpochVisitsEveryWindowOnceAndEveryWindowIsInTheStream) {
  const auto [windows, context] = GetParam();
  // Up to context - 1 tokens past the last whole window, which no window reads.
  const int64_t tokens = windows * context + 1 + windows % context;
  const SampleOrder order(tokens, context, 1234, "corpus");
  EXPECT_EQ(order.samples_per_epoch(), windows);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> windows = epoch_windows(order, epoch);
    std::sort(windows.begin(), windows.end());
    for (int64_t w = 0; w < order.samples_per_epoch(); ++w) ASSERT_EQ(windows[w], w);
  }
  for (int64_t sample = 0; sample < 3 * order.samples_per_epoch(); ++sample) {
    const int64_t offset = order.token_offset(sample);
    ASSERT_GE(offset, 0);
    ASSERT_LE(offset + order.window_tokens(), tokens) << "sample " << sample;
    ASSERT_EQ(offset % context, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(WindowsAndContexts, SampleOrders,
                         testing::Combine(testing::Values(1, 2, 3, 5, 1000, 4096, 70001),
                                          testing::Values(1, 8, 16)),
                         [](const auto& info) {
                           return "windows" + std::to_string(std::get<0>(info.param)) + "_context" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(SampleOrder, TheOrderIsAFunctionOfSeedAndEpochOnly) {
  const SampleOrder a(100001, 10, 7, "c"), b(100001, 10, 7, "c"), other(100001, 10, 8, "c");
  EXPECT_EQ(epoch_windows(a, 0), epoch_windows(b, 0));
  EXPECT_EQ(epoch_windows(a, 5), epoch_windows(b, 5));
  EXPECT_NE(epoch_windows(a, 0), epoch_windows(other, 0));
  EXPECT_NE(epoch_windows(a, 0), epoch_windows(a, 1));
  // Shuffled: not the identity, and far from it (an independent look at the mixing).
  const std::vector<int64_t> first = epoch_windows(a, 0);
  int64_t in_place = 0;
  for (int64_t i = 0; i < static_cast<int64_t>(first.size()); ++i) in_place += first[i] == i;
  EXPECT_LT(in_place, 10);  // a random permutation fixes 1 on average
}

TEST(SampleOrder, UnshuffledWindowsComeInOrderEveryEpoch) {
  const SampleOrder order(101, 10, 7, "c", /*shuffle=*/false);
  EXPECT_EQ(order.samples_per_epoch(), 10);
  EXPECT_EQ(order.window_of(3), 3);
  EXPECT_EQ(order.window_of(13), 3);
  EXPECT_EQ(order.token_offset(19), 90);
  EXPECT_EQ(order.epoch_of(19), 1);
}

TEST(SampleOrder, FewerTokensThanOneSampleAreRefusedNamingTheDataset) {
  EXPECT_EQ(error_of([] { SampleOrder(8, 8, 0, "/d/corpus.bin"); }),
            "[data.samples] /d/corpus.bin holds 8 tokens, fewer than one sample of context + 1 "
            "= 9 tokens");
  EXPECT_EQ(SampleOrder(9, 8, 0, "c").samples_per_epoch(), 1);
}

class DpShares : public testing::TestWithParam<std::tuple<int, int64_t>> {};

TEST_P(DpShares, ReplicasReadDisjointSharesWhoseUnionIsOneProcesssBatch) {
  const auto [dp, per_replica] = GetParam();
  const int64_t batch = dp * per_replica;
  for (int64_t step : {0, 1, 7}) {
    const SampleRange whole = batch_samples(step, batch);
    std::set<int64_t> seen;
    for (int replica = 0; replica < dp; ++replica) {
      const SampleRange share = dp_share(step, batch, dp, replica);
      EXPECT_EQ(share.size(), per_replica);
      for (int64_t s = share.begin; s < share.end; ++s) {
        EXPECT_TRUE(seen.insert(s).second) << "sample " << s << " read twice";
        // Row s - whole.begin of one process's batch, the row pipeline.cpp gives this replica.
        EXPECT_EQ((s - whole.begin) / per_replica, replica);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), batch);
    EXPECT_EQ(*seen.begin(), whole.begin);
    EXPECT_EQ(*seen.rbegin(), whole.end - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(DpAndShare, DpShares,
                         testing::Combine(testing::Values(1, 2, 3, 8), testing::Values(1, 4)));

TEST(DpShare, ABatchThatDpDoesNotDivideIsRefused) {
  EXPECT_EQ(error_of([] { dp_share(0, 10, 4, 0); }),
            "[data.samples] the batch of 10 samples does not split into dp=4 equal shares; use a "
            "multiple of 4");
}

}  // namespace
}  // namespace baton::data
