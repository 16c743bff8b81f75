// Communicator::new_group: collectives over a subset of the ranks (a dp
// group), which block on the members alone and name the group in errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "baton/comm/local_group.h"
#include "baton/core/error.h"
#include "baton/topology/topology.h"

namespace baton::comm {
namespace {

using testing::HasSubstr;

const auto kTimeout = std::chrono::seconds(30);

TEST(GroupTest, DpGroupsOfATwoByTwoGridSumOverTheirMembersOnly) {
  const topology::Topology grid(/*dp=*/2, /*pp=*/2, /*tp=*/1);
  std::vector<double> sums(4), async_sums(4);
  std::vector<int> group_ranks(4), group_sizes(4);
  run_local_group(4, kTimeout, [&](Communicator& world) {
    const int r = world.rank();
    Communicator dp = world.new_group(grid.dp_group(r), "dp");
    group_ranks[r] = dp.rank();
    group_sizes[r] = dp.world_size();
    std::vector<torch::Tensor> t{torch::full({3}, r + 1.0, torch::kFloat64)};
    dp.all_reduce_sum(t, "the test sum");
    sums[r] = t[0][2].item<double>();
    // Larger than the shared-memory path of a world communicator: Gloo, async.
    std::vector<torch::Tensor> big{torch::full({100000}, 10.0 * (r + 1), torch::kFloat32),
                                   torch::full({2}, 1.0, torch::kFloat64)};
    ReduceHandle handle = dp.all_reduce_sum_async(big, "the async sum");
    handle.wait();
    async_sums[r] = big[0][99999].item<double>() + big[1][0].item<double>();
  });
  // dp groups: {0, 1} and {2, 3} (tp = 1: rank = pp_index * dp + dp_index).
  EXPECT_EQ(sums, (std::vector<double>{3, 3, 7, 7}));
  EXPECT_EQ(async_sums, (std::vector<double>{32, 32, 72, 72}));
  EXPECT_EQ(group_ranks, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(group_sizes, (std::vector<int>{2, 2, 2, 2}));
}

TEST(GroupTest, AGroupSumsWhileRanksOutsideItHaveNotMadeTheirs) {
  // Ranks 1 and 3 make and use their group while 0 and 2 make theirs late.
  std::vector<double> sums(4);
  run_local_group(4, kTimeout, [&](Communicator& world) {
    const int r = world.rank();
    if (r % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Communicator group = world.new_group(r % 2 ? std::vector<int>{1, 3} : std::vector<int>{0, 2}, "dp");
    std::vector<torch::Tensor> t{torch::full({1}, double(r), torch::kFloat64)};
    group.all_reduce_sum(t);
    sums[r] = t[0].item<double>();
  });
  EXPECT_EQ(sums, (std::vector<double>{2, 4, 2, 4}));
}

TEST(GroupTest, ARankOutsideTheMembersIsRefusedByName) {
  run_local_group(2, kTimeout, [&](Communicator& world) {
    if (world.rank() != 1) return;
    try {
      world.new_group({0}, "dp");
      ADD_FAILURE() << "rank 1 made a group it is not in";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("rank 1 is not a member of the dp group of ranks 0"));
    }
  });
}

TEST(GroupTest, AGroupCarriesNoPointToPoint) {
  run_local_group(2, kTimeout, [&](Communicator& world) {
    Communicator dp = world.new_group({0, 1}, "dp");
    const int other = 1 - dp.rank();
    EXPECT_THROW(dp.irecv(other, Tag{0, 0, Direction::kForward}), Error);
  });
}

TEST(GroupTest, ATimedOutAllReduceNamesTheGroupAndTheWorldRank) {
  std::string message;
  run_local_group(3, std::chrono::seconds(1), [&](Communicator& world) {
    if (world.rank() == 1) return;  // not a member: never involved
    Communicator dp = world.new_group({0, 2}, "dp");
    if (world.rank() == 0) {
      // Rank 2 never joins the sum (it waits past the timeout, then leaves).
      std::this_thread::sleep_for(std::chrono::milliseconds(2500));
      return;
    }
    std::vector<torch::Tensor> t{torch::ones({1})};
    try {
      dp.all_reduce_sum(t, "stage 0 gradient bucket 0 REDUCE_GRAD");
    } catch (const Error& e) {
      message = e.what();
    }
  });
  EXPECT_THAT(message, HasSubstr("[comm] rank 2 "));
  EXPECT_THAT(message, HasSubstr("stage 0 gradient bucket 0 REDUCE_GRAD (over the dp group of ranks 0, 2)"));
}

}  // namespace
}  // namespace baton::comm
