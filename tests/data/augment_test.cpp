#include "baton/data/augment.h"

#include "baton/core/error.h"
#include "baton/data/batches.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <utility>

namespace baton::data {
namespace {

constexpr double kFill = -1;

// n images of 1 x 8 x 8 on the fill, each with one pixel of 5 at (row, col).
torch::Tensor dots(int64_t n, int64_t row, int64_t col) {
  torch::Tensor images = torch::full({n, 1, 8, 8}, kFill);
  images.index_put_({torch::indexing::Slice(), 0, row, col}, 5.0);
  return images;
}

// Where image i's dot is, or (-1, -1) when it moved out of the frame.
std::pair<int64_t, int64_t> dot_of(const torch::Tensor& image) {
  const torch::Tensor at = (image[0] == 5.0).nonzero();
  if (at.size(0) == 0) return {-1, -1};
  EXPECT_EQ(at.size(0), 1);
  return {at[0][0].item<int64_t>(), at[0][1].item<int64_t>()};
}

TEST(AugmentTest, AShiftMovesEachImageByAtMostShiftPixelsAndFillsWhatItUncovers) {
  const torch::Tensor images = dots(64, 4, 4);
  at::Generator gen = make_generator(7);
  AugmentOptions options;
  options.shift = 2;
  options.flip = false;
  options.fill = kFill;
  const torch::Tensor out = augment_images(images, options, gen);
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t i = 0; i < 64; ++i) {
    const auto [r, c] = dot_of(out[i]);
    ASSERT_GE(r, 0) << "image " << i << " lost its dot";
    EXPECT_LE(std::abs(r - 4), 2);
    EXPECT_LE(std::abs(c - 4), 2);
    offsets.insert({r - 4, c - 4});
    // Every other pixel is the fill: a move copies, it does not blend.
    EXPECT_EQ((out[i] == kFill).sum().item<int64_t>(), 63);
  }
  // 64 draws of 25 offsets: a generator that ignored the draw would give one.
  EXPECT_GE(offsets.size(), 10u);
  EXPECT_TRUE(torch::equal(images, dots(64, 4, 4))) << "the input changed";
}

TEST(AugmentTest, ADotAtTheCornerLeavesTheFrameWhenMovedOutward) {
  at::Generator gen = make_generator(3);
  AugmentOptions options;
  options.shift = 1;
  options.flip = false;
  options.fill = kFill;
  const torch::Tensor out = augment_images(dots(64, 0, 0), options, gen);
  int lost = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const auto [r, c] = dot_of(out[i]);
    if (r < 0) {
      ++lost;
      EXPECT_EQ((out[i] == kFill).sum().item<int64_t>(), 64);
    } else {
      EXPECT_LE(r, 1);
      EXPECT_LE(c, 1);
    }
  }
  // The dot stays only for offsets (0 or +1, 0 or +1): 4 of 9; 64 draws lose some.
  EXPECT_GT(lost, 0);
  EXPECT_LT(lost, 64);
}

TEST(AugmentTest, AFlipGivesTheImageOrItsMirrorAndBothOccur) {
  const torch::Tensor images = torch::randn({64, 1, 8, 8});
  at::Generator gen = make_generator(11);
  AugmentOptions options;
  options.shift = 0;
  options.flip = true;
  const torch::Tensor out = augment_images(images, options, gen);
  int mirrored = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const bool same = torch::equal(out[i], images[i]);
    const bool mirror = torch::equal(out[i], images[i].flip({2}));
    EXPECT_TRUE(same || mirror) << "image " << i;
    mirrored += mirror ? 1 : 0;
  }
  EXPECT_GT(mirrored, 10);
  EXPECT_LT(mirrored, 54);
}

TEST(AugmentTest, TheSameSeedGivesTheSameImages) {
  const torch::Tensor images = torch::randn({16, 1, 8, 8});
  AugmentOptions options;
  at::Generator a = make_generator(5), b = make_generator(5), c = make_generator(6);
  const torch::Tensor first = augment_images(images, options, a);
  EXPECT_TRUE(torch::equal(first, augment_images(images, options, b)));
  EXPECT_FALSE(torch::equal(first, augment_images(images, options, c)));
}

TEST(AugmentTest, BadShapesAndShiftsAreRefused) {
  at::Generator gen = make_generator(1);
  AugmentOptions options;
  EXPECT_THROW(augment_images(torch::zeros({4, 8, 8}), options, gen), Error);
  options.shift = 8;
  EXPECT_THROW(augment_images(torch::zeros({4, 1, 8, 8}), options, gen), Error);
  options.shift = -1;
  EXPECT_THROW(augment_images(torch::zeros({4, 1, 8, 8}), options, gen), Error);
}

}  // namespace
}  // namespace baton::data
