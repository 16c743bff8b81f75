#include "baton/partition/partition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baton/core/error.h"
#include "brute_force.h"

namespace baton::partition {
namespace {

using ::testing::HasSubstr;

using testing::error_of;

TEST(Partition, KnowsItsStagesLayersAndBoundaries) {
  const Partition p({3, 5, 4});
  EXPECT_EQ(p.stages(), 3);
  EXPECT_EQ(p.layers(), 12);
  EXPECT_EQ(p.layers_in(1), 5);
  EXPECT_EQ(p.boundaries(), (std::vector<int>{0, 3, 8}));
  EXPECT_EQ(p.first_layer(2), 8);
  EXPECT_EQ(p.end_layer(2), 12);
  EXPECT_EQ(p.end_layer(0), 3);
}

TEST(Partition, MapsEveryLayerToTheStageThatHoldsIt) {
  const Partition p({3, 1, 4});
  const std::vector<int> expected = {0, 0, 0, 1, 2, 2, 2, 2};
  for (int layer = 0; layer < p.layers(); ++layer) {
    EXPECT_EQ(p.stage_of_layer(layer), expected[layer]) << "layer " << layer;
  }
}

TEST(Partition, RejectsALayerOutsideTheModel) {
  const Partition p({2, 2});
  EXPECT_THAT(error_of([&] { p.stage_of_layer(4); }),
              HasSubstr("[partition.stage_of_layer] layer 4 is outside the model's 4 layers"));
  EXPECT_THAT(error_of([&] { p.stage_of_layer(-1); }), HasSubstr("layer -1"));
}

TEST(Partition, RejectsAnEmptyStage) {
  EXPECT_THAT(error_of([] {
                Partition({2, 0, 1});
              }),
              HasSubstr("[partition] stage 1 has 0 layers; every stage needs at least one layer"));
}

TEST(Partition, DefaultIsEmpty) {
  const Partition p;
  EXPECT_EQ(p.stages(), 0);
  EXPECT_EQ(p.layers(), 0);
  EXPECT_TRUE(p.boundaries().empty());
  EXPECT_EQ(p.to_string(), "");
}

TEST(Partition, FormatsAsCommaSeparatedCountsAndParsesBack) {
  const Partition p({3, 5, 4});
  EXPECT_EQ(p.to_string(), "3,5,4");
  EXPECT_EQ(parse_partition(p.to_string(), 3, 12), p);
  EXPECT_EQ(parse_partition("7", 1, 7), Partition({7}));
}

TEST(Partition, ParseAllowsSpacesAroundCounts) {
  EXPECT_EQ(parse_partition(" 3, 5 ,4 ", 3, 12), Partition({3, 5, 4}));
}

TEST(Partition, ParseRejectsCountsThatDoNotSumToTheModel) {
  EXPECT_EQ(error_of([] { parse_partition("3,5", 2, 9); }),
            "[partition.balance] --balance 3,5 sums to 8 layers but the model has 9");
}

TEST(Partition, ParseRejectsTheWrongNumberOfStages) {
  EXPECT_EQ(error_of([] { parse_partition("3,5", 3, 8); }),
            "[partition.balance] --balance 3,5 gives 2 stages but the pipeline has 3");
  EXPECT_EQ(error_of([] { parse_partition("8", 2, 8); }),
            "[partition.balance] --balance 8 gives 1 stage but the pipeline has 2");
}

TEST(Partition, ParseRejectsZeroAndNegativeCounts) {
  EXPECT_EQ(error_of([] { parse_partition("3,0,5", 3, 8); }),
            "[partition.balance] --balance 3,0,5: stage 1 has 0 layers; every stage needs at "
            "least one layer");
  EXPECT_THAT(error_of([] { parse_partition("-2,10", 2, 8); }), HasSubstr("stage 0 has -2 layers"));
}

TEST(Partition, ParseRejectsTokensThatAreNotCounts) {
  EXPECT_EQ(error_of([] { parse_partition("3,x,4", 3, 8); }),
            "[partition.balance] --balance 3,x,4: \"x\" is not a layer count");
  EXPECT_THAT(error_of([] { parse_partition("3,,4", 3, 7); }),
              HasSubstr("\"\" is not a layer count"));
  EXPECT_THAT(error_of([] { parse_partition("3,4,", 2, 7); }),
              HasSubstr("\"\" is not a layer count"));
  EXPECT_THAT(error_of([] { parse_partition("3.5,4", 2, 7); }),
              HasSubstr("\"3.5\" is not a layer count"));
  EXPECT_THAT(error_of([] { parse_partition("3 4", 2, 7); }),
              HasSubstr("\"3 4\" is not a layer count"));
  EXPECT_THAT(error_of([] { parse_partition("99999999999,1", 2, 7); }),
              HasSubstr("\"99999999999\" is not a layer count"));
}

TEST(Partition, ParseRejectsAnEmptyList) {
  EXPECT_EQ(error_of([] { parse_partition("  ", 2, 7); }),
            "[partition.balance] --balance is empty; expected 2 comma-separated layer counts such "
            "as 3,5,4");
}

}  // namespace
}  // namespace baton::partition
