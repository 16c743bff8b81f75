#include "baton/data/batches.h"

#include "baton/core/error.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace baton::data {
namespace {

Examples numbered(int64_t n) {
  const auto rows = torch::arange(n, torch::kLong);
  return Examples{rows.to(torch::kFloat).unsqueeze(1), rows};
}

TEST(BatchesTest, SameSeedAndEpochGiveTheSameBatches) {
  Batches a(numbered(50), BatchesOptions(8).seed(3));
  Batches b(numbered(50), BatchesOptions(8).seed(3));
  a.set_epoch(2);
  b.set_epoch(2);
  for (int64_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::equal(a[i].targets, b[i].targets));
  }
}

TEST(BatchesTest, SeedsAndEpochsReorderTheExamples) {
  Batches a(numbered(50), BatchesOptions(50).seed(3));
  Batches b(numbered(50), BatchesOptions(50).seed(4));
  const auto epoch0 = a[0].targets;
  EXPECT_FALSE(torch::equal(epoch0, b[0].targets));
  a.set_epoch(1);
  EXPECT_FALSE(torch::equal(epoch0, a[0].targets));
  a.set_epoch(0);
  EXPECT_TRUE(torch::equal(epoch0, a[0].targets));
}

TEST(BatchesTest, AnEpochVisitsEveryExampleOnceWithInputsMatchingTargets) {
  Batches batches(numbered(50), BatchesOptions(8).seed(1));
  ASSERT_EQ(batches.size(), 7);
  EXPECT_EQ(batches[6].size(), 2);
  std::vector<torch::Tensor> seen;
  for (int64_t i = 0; i < batches.size(); ++i) {
    const Examples batch = batches[i];
    EXPECT_TRUE(torch::equal(batch.inputs.squeeze(1).to(torch::kLong), batch.targets));
    seen.push_back(batch.targets);
  }
  EXPECT_TRUE(torch::equal(std::get<0>(torch::cat(seen).sort()), torch::arange(50, torch::kLong)));
}

TEST(BatchesTest, DropLastAndNoShuffleKeepFullBatchesInOrder) {
  Batches batches(numbered(50), BatchesOptions(8).shuffle(false).drop_last(true));
  ASSERT_EQ(batches.size(), 6);
  EXPECT_TRUE(torch::equal(batches[1].targets, torch::arange(8, 16, torch::kLong)));
}

TEST(BatchesTest, RejectsMismatchedRowsAndBadIndices) {
  EXPECT_THROW(Batches(Examples{torch::zeros({4, 2}), torch::zeros({5})}, BatchesOptions(2)),
               baton::Error);
  EXPECT_THROW(Batches(numbered(4), BatchesOptions(0)), baton::Error);
  Batches batches(numbered(4), BatchesOptions(2));
  EXPECT_THROW(batches[2], baton::Error);
}

}  // namespace
}  // namespace baton::data
