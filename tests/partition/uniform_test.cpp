#include <gtest/gtest.h>

#include "baton/core/error.h"
#include "baton/partition/balance.h"

namespace baton::partition {
namespace {

TEST(Uniform, GivesEarlierStagesTheExtraLayers) {
  EXPECT_EQ(uniform(10, 3), Partition({4, 3, 3}));
  EXPECT_EQ(uniform(11, 3), Partition({4, 4, 3}));
  EXPECT_EQ(uniform(12, 3), Partition({4, 4, 4}));
  EXPECT_EQ(uniform(7, 4), Partition({2, 2, 2, 1}));
}

TEST(Uniform, SweepKeepsStagesWithinOneLayerAndSumsToTheModel) {
  for (int layers = 1; layers <= 40; ++layers) {
    for (int stages = 1; stages <= layers; ++stages) {
      const Partition p = uniform(layers, stages);
      ASSERT_EQ(p.stages(), stages);
      ASSERT_EQ(p.layers(), layers);
      for (int s = 0; s < stages; ++s) {
        // Stage s gets ceil((L - s) / S): the floor, plus one for the first L mod S stages.
        EXPECT_EQ(p.layers_in(s), (layers - s + stages - 1) / stages)
            << "L=" << layers << " S=" << stages << " stage " << s;
      }
    }
  }
}

TEST(Uniform, OneStageHoldsEveryLayer) {
  EXPECT_EQ(uniform(9, 1), Partition({9}));
}

TEST(Uniform, AsManyStagesAsLayersGivesOneLayerEach) {
  EXPECT_EQ(uniform(5, 5), Partition({1, 1, 1, 1, 1}));
}

TEST(Uniform, RejectsMoreStagesThanLayers) {
  try {
    uniform(3, 5);
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[partition] 5 stages but the model has only 3 layers; every stage needs at least "
                 "one layer");
  }
}

TEST(Uniform, RejectsZeroStages) {
  EXPECT_THROW(uniform(3, 0), Error);
}

}  // namespace
}  // namespace baton::partition
