// Micro-batches cut on demand (MicrobatchCuts) against LibTorch's own
// tensor_split of the same tensors, and the loss scales against the rows.
#include "baton/runtime/microbatch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "baton/core/error.h"

namespace baton::runtime {
namespace {

using testing::HasSubstr;

TEST(MicrobatchCuts, EachCutIsTheViewTensorSplitMakes) {
  for (int64_t rows : {1, 7, 12, 256}) {
    const torch::Tensor x = torch::arange(rows * 3, torch::kFloat32).reshape({rows, 3});
    const torch::Tensor positions = torch::arange(rows, torch::kLong);
    const torch::Tensor mask = torch::ones({5, 5}, torch::kBool);  // shared by every cut
    for (int m = 1; m <= rows && m <= 40; ++m) {
      const MicrobatchCuts cuts({x, positions, mask}, m, {2});
      const auto want_x = x.tensor_split(m, 0), want_p = positions.tensor_split(m, 0);
      ASSERT_EQ(cuts.microbatches(), m);
      EXPECT_EQ(cuts.rows(), rows);
      int64_t total = 0;
      for (int k = 0; k < m; ++k) {
        const nn::Tensors got = cuts.at(k);
        ASSERT_EQ(got.size(), 3u);
        EXPECT_TRUE(torch::equal(got[0], want_x[k])) << rows << " rows, m " << m << ", cut " << k;
        EXPECT_TRUE(torch::equal(got[1], want_p[k])) << rows << " rows, m " << m << ", cut " << k;
        EXPECT_EQ(got[0].data_ptr(), want_x[k].data_ptr()) << "a view, not a copy";
        EXPECT_TRUE(got[2].is_same(mask));
        EXPECT_EQ(cuts.rows(k), want_x[k].size(0));
        total += cuts.rows(k);
      }
      EXPECT_EQ(total, rows);
      // The scales weight each micro-batch's mean loss by its share of the rows.
      const std::vector<double> scales = loss_scales(cuts);
      const std::vector<double> from_tensors =
          loss_scales(std::vector<torch::Tensor>(want_x.begin(), want_x.end()));
      ASSERT_EQ(scales.size(), from_tensors.size());
      for (size_t k = 0; k < scales.size(); ++k) EXPECT_DOUBLE_EQ(scales[k], from_tensors[k]);
    }
  }
}

TEST(MicrobatchCuts, BadInputsAreRefusedAtConstructionNamingTheInput) {
  const torch::Tensor x = torch::zeros({8, 2});
  EXPECT_THAT([&] { MicrobatchCuts({x}, 9); },
              testing::ThrowsMessage<Error>(HasSubstr("batch of 8 samples cannot make 9")));
  EXPECT_THAT(
      [&] {
        MicrobatchCuts({x, torch::zeros({4})}, 2);
      },
      testing::ThrowsMessage<Error>(HasSubstr("input 1 has 4 rows on dim 0 but input 0 has 8")));
  EXPECT_THAT(
      [&] {
        MicrobatchCuts({x, torch::tensor(1.0)}, 2);
      },
      testing::ThrowsMessage<Error>(HasSubstr("input 1 has no dim 0")));
  EXPECT_THAT(
      [&] {
        MicrobatchCuts({x, torch::Tensor()}, 2);
      },
      testing::ThrowsMessage<Error>(HasSubstr("input 1 of the model is undefined")));
  EXPECT_THAT([&] { MicrobatchCuts({x}, 2, {3}); },
              testing::ThrowsMessage<Error>(HasSubstr("whole input 3 is not among")));
  EXPECT_THAT([&] { MicrobatchCuts({x}, 0); },
              testing::ThrowsMessage<Error>(HasSubstr("micro-batches must be at least 1")));
  // A scalar declared whole is fine: every micro-batch shares it.
  const MicrobatchCuts cuts({x, torch::tensor(1.0)}, 2, {1});
  EXPECT_EQ(cuts.at(1)[0].size(0), 4);
}

}  // namespace
}  // namespace baton::runtime
