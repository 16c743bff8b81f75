// Lean ranks (issue 32): a rank holds only the part of the data its stages
// read. Each part is checked against an independent source: the whole split
// loaded and normalized at once, the same step's batch of a rank that reads
// everything, and the placement of the schedule.
#include "baton/train/data_source.h"

#include <gtest/gtest.h>

#include "baton/data/fashion_mnist.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/runnable.h"

namespace baton::train {
namespace {

schedule::Schedule lowered(const std::string& name, int ranks) {
  return schedule::lowered_schedule(schedule::ScheduleSource::generated(
      name, schedule::GeneratorOptions{}.set_ranks(ranks).set_microbatches(2 * ranks)));
}

TEST(DataRoles, TheFirstStagesRanksReadInputsTheLastStagesTargetsAMiddleRankNeither) {
  const schedule::Schedule one = lowered("1f1b", 3);
  EXPECT_TRUE(data_roles(one, 0).inputs);
  EXPECT_FALSE(data_roles(one, 0).targets);
  EXPECT_FALSE(data_roles(one, 1).inputs || data_roles(one, 1).targets);
  EXPECT_TRUE(data_roles(one, 2).targets);
  EXPECT_FALSE(data_roles(one, 2).inputs);
  // A V schedule puts the first and the last stage on rank 0.
  const schedule::Schedule v = lowered("zb-v", 2);
  EXPECT_TRUE(data_roles(v, 0).inputs && data_roles(v, 0).targets);
  EXPECT_FALSE(data_roles(v, 1).inputs || data_roles(v, 1).targets);
}

TEST(DataSource, EachRoleGetsBitwiseTheRowsOfTheWholeSplitAndNothingElse) {
  TrainConfig c;
  c.model = "cnn";
  c.batch = 32;
  const data::Examples whole = data::load_fashion_mnist(data::Split::kTest);
  auto full = make_data_source(c, DataRoles{true, true});
  auto first = make_data_source(c, DataRoles{true, false});
  auto last = make_data_source(c, DataRoles{false, true});
  auto middle = make_data_source(c, DataRoles{false, false});
  for (int64_t step : {0, 1, 1875}) {  // 1875 = 60000 / 32: the second epoch's first batch
    const auto [inputs, targets] = full->batch(step);
    const auto [first_inputs, first_targets] = first->batch(step);
    const auto [last_inputs, last_targets] = last->batch(step);
    const auto [middle_inputs, middle_targets] = middle->batch(step);
    EXPECT_TRUE(torch::equal(first_inputs, inputs)) << step;
    EXPECT_TRUE(torch::equal(last_targets, targets)) << step;
    EXPECT_FALSE(first_targets.defined() || last_inputs.defined());
    EXPECT_FALSE(middle_inputs.defined() || middle_targets.defined());
  }
  // The test set: the same size on every rank, the rows of the split normalized whole.
  for (auto* source : {full.get(), first.get(), last.get(), middle.get()})
    EXPECT_EQ(source->test_size(), 10000);
  const auto [test_inputs, test_targets] = first->test_rows(9000, 1000);
  EXPECT_TRUE(torch::equal(test_inputs, whole.inputs.narrow(0, 9000, 1000)));
  EXPECT_FALSE(test_targets.defined());
  EXPECT_TRUE(torch::equal(last->test_rows(0, 10).second, whole.targets.narrow(0, 0, 10)));
  // A rank that reads no inputs profiles on zeros of their shape.
  EXPECT_EQ(middle->zero_inputs(4).sizes(), whole.inputs.narrow(0, 0, 4).sizes());
}

TEST(DataSource, AMiddleRankReadsNoTextAndTheOthersTheSameWindows) {
  TrainConfig c;
  c.model = "gpt";
  c.batch = 4;
  c.context = 16;
  auto full = make_data_source(c, DataRoles{true, true});
  auto last = make_data_source(c, DataRoles{false, true});
  auto middle = make_data_source(c, DataRoles{false, false});
  const auto [inputs, targets] = full->batch(3);
  EXPECT_EQ(inputs.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(last->batch(3).second, targets));
  EXPECT_FALSE(last->batch(3).first.defined());
  EXPECT_FALSE(middle->batch(3).first.defined() || middle->batch(3).second.defined());
  // The targets are the inputs one byte on.
  EXPECT_TRUE(torch::equal(inputs.narrow(1, 1, 15), targets.narrow(1, 0, 15)));
}

}  // namespace
}  // namespace baton::train
