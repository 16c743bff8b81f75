#include "baton/partition/stage_load.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baton/core/error.h"

namespace baton::partition {
namespace {

std::vector<LayerCost> three_layers() {
  std::vector<LayerCost> costs(3);
  costs[0] = LayerCost()
                 .set_forward_time(1)
                 .set_backward_time(2)
                 .set_parameter_bytes(10)
                 .set_activation_bytes(4)
                 .set_output_bytes(8);
  costs[1] = LayerCost()
                 .set_forward_time(2)
                 .set_backward_time(4)
                 .set_parameter_bytes(20)
                 .set_activation_bytes(1)
                 .set_output_bytes(2);
  costs[2] = LayerCost()
                 .set_forward_time(3)
                 .set_backward_time(6)
                 .set_parameter_bytes(30)
                 .set_activation_bytes(5)
                 .set_output_bytes(6);
  return costs;
}

TEST(StageLoads, AddComputeCommAndMemoryByHand) {
  const auto options =
      BalanceOptions().set_comm_latency(0.5).set_comm_bytes_per_time(4).set_activations_in_flight(
          {2, 1});
  const auto loads = stage_loads(Partition({2, 1}), three_layers(), options);
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_DOUBLE_EQ(loads[0].compute_time, 9);
  // Layer 1 ends stage 0: 2 x (0.5 + 2 / 4).
  EXPECT_DOUBLE_EQ(loads[0].comm_time, 2);
  EXPECT_DOUBLE_EQ(loads[0].time(), 11);
  EXPECT_DOUBLE_EQ(loads[0].memory_bytes, 30 + 2 * 5);
  EXPECT_DOUBLE_EQ(loads[1].compute_time, 9);
  EXPECT_DOUBLE_EQ(loads[1].comm_time, 0);  // the last stage sends nothing
  EXPECT_DOUBLE_EQ(loads[1].memory_bytes, 30 + 5);
}

TEST(StageLoads, ZeroBandwidthMeansOnlyLatency) {
  const auto loads =
      stage_loads(Partition({1, 2}), three_layers(), BalanceOptions().set_comm_latency(3));
  EXPECT_DOUBLE_EQ(loads[0].comm_time, 6);
  EXPECT_DOUBLE_EQ(loads[0].memory_bytes, 14);  // one micro-batch in flight by default
}

TEST(StageLoads, RejectsAPartitionOfAnotherModel) {
  try {
    stage_loads(Partition({2, 2}), three_layers());
    FAIL() << "expected baton::Error";
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "[partition.stage_loads] partition 2,2 covers 4 layers but 3 layer costs were given");
  }
}

}  // namespace
}  // namespace baton::partition
