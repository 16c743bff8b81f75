#include "baton/data/synthetic.h"

#include "baton/core/error.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace baton::data {
namespace {

TEST(SyntheticTest, IsDeterministicInTheSeed) {
  const auto options = SyntheticOptions().samples(64).features(8).classes(4).seed(5);
  const Examples a = synthetic_classification(options);
  const Examples b = synthetic_classification(options);
  EXPECT_TRUE(torch::equal(a.inputs, b.inputs));
  EXPECT_TRUE(torch::equal(a.targets, b.targets));
  const Examples c = synthetic_classification(SyntheticOptions(options).seed(6));
  EXPECT_FALSE(torch::equal(a.inputs, c.inputs));
}

TEST(SyntheticTest, LabelsComeFromOneFixedTeacher) {
  const auto options = SyntheticOptions().samples(256).features(8).classes(4);
  const Examples a = synthetic_classification(SyntheticOptions(options).seed(1));
  const Examples b = synthetic_classification(SyntheticOptions(options).seed(2));
  EXPECT_EQ(a.inputs.sizes(), (std::vector<int64_t>{256, 8}));
  EXPECT_EQ(a.targets.scalar_type(), torch::kLong);
  EXPECT_GE(a.targets.min().item<int64_t>(), 0);
  EXPECT_LT(a.targets.max().item<int64_t>(), 4);
  EXPECT_GT(a.targets.bincount().gt(0).sum().item<int64_t>(), 1);
  // A linear teacher: a least-squares fit on one set's one-hot labels transfers to the other.
  const auto features = torch::cat({a.inputs, torch::ones({256, 1})}, 1);
  const auto onehot = torch::one_hot(a.targets, 4).to(torch::kFloat);
  const auto fit = std::get<0>(torch::linalg_lstsq(features, onehot));
  const auto predicted = torch::cat({b.inputs, torch::ones({256, 1})}, 1).matmul(fit).argmax(1);
  EXPECT_GT(predicted.eq(b.targets).to(torch::kFloat).mean().item<double>(), 0.6);
}

TEST(SyntheticTest, TheTeacherSeedChangesOnlyTheLabels) {
  const auto options = SyntheticOptions().samples(256).features(8).classes(4);
  const Examples a = synthetic_classification(options);
  const Examples b = synthetic_classification(SyntheticOptions(options).teacher_seed(1));
  EXPECT_TRUE(torch::equal(a.inputs, b.inputs));
  EXPECT_FALSE(torch::equal(a.targets, b.targets));
}

TEST(SyntheticTest, RejectsFewerThanTwoClasses) {
  EXPECT_THROW(synthetic_classification(SyntheticOptions().classes(1)), baton::Error);
}

}  // namespace
}  // namespace baton::data
