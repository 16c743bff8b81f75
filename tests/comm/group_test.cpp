// Communicator::new_group: collectives over a subset of the ranks (a dp
// group), which block on the members alone and name the group in errors.
// RankLayout: a rank's coordinates and groups, checked against
// topology::Topology; a solo communicator for groups of one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "baton/comm/local_group.h"
#include "baton/comm/rank_layout.h"
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

TEST(GroupTest, AnAsyncSumNotesWhenItFinishedNotWhenItWasWaitedFor) {
  // Rank 1 waits for the sum at once; rank 0 only after rank 1's wait has
  // returned and another 500 ms: its finish time comes before its wait.
  std::atomic<bool> rank1_done{false};
  std::vector<double> finished_before_wait_ms(2), sums(2);
  run_local_group(2, kTimeout, [&](Communicator& world) {
    const int r = world.rank();
    Communicator dp = world.new_group({0, 1}, "dp");
    std::vector<torch::Tensor> big{torch::full({100000}, r + 1.0, torch::kFloat32)};
    const auto started = std::chrono::steady_clock::now();
    ReduceHandle handle = dp.all_reduce_sum_async(big, "the timed sum");
    if (r == 0) {
      while (!rank1_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    const auto waiting = std::chrono::steady_clock::now();
    handle.wait();
    if (r == 1) rank1_done = true;
    EXPECT_GE(handle.finished_at(), started);
    EXPECT_LE(handle.finished_at(), std::chrono::steady_clock::now());
    finished_before_wait_ms[r] =
        std::chrono::duration<double, std::milli>(waiting - handle.finished_at()).count();
    sums[r] = big[0][7].item<double>();
  });
  EXPECT_EQ(sums, (std::vector<double>{3, 3}));
  EXPECT_GT(finished_before_wait_ms[0], 0);  // about 500 ms
}

TEST(GroupTest, AGroupSumsWhileRanksOutsideItHaveNotMadeTheirs) {
  // Ranks 1 and 3 make and use their group while 0 and 2 make theirs late.
  std::vector<double> sums(4);
  run_local_group(4, kTimeout, [&](Communicator& world) {
    const int r = world.rank();
    if (r % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    Communicator group =
        world.new_group(r % 2 ? std::vector<int>{1, 3} : std::vector<int>{0, 2}, "dp");
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
  EXPECT_THAT(message,
              HasSubstr("stage 0 gradient bucket 0 REDUCE_GRAD (over the dp group of ranks 0, 2)"));
}

TEST(SoloTest, ACommunicatorOfOneRankLeavesSumsAsTheyAreAndHasNoPeers) {
  const std::shared_ptr<Communicator> one = solo(std::chrono::seconds(3));
  EXPECT_EQ(one->rank(), 0);
  EXPECT_EQ(one->world_size(), 1);
  EXPECT_EQ(one->backend_name(), "solo");
  std::vector<torch::Tensor> t{torch::full({3}, 2.5), torch::full({2}, 7, torch::kLong)};
  one->all_reduce_sum(t, "a sum over one rank");
  EXPECT_TRUE(torch::equal(t[0], torch::full({3}, 2.5)));
  EXPECT_TRUE(torch::equal(t[1], torch::full({2}, 7, torch::kLong)));
  one->barrier();
  EXPECT_THROW(one->isend(t[0], 0, Tag{0, 0, Direction::kForward}), Error);
  EXPECT_THROW(one->irecv(0, Tag{0, 0, Direction::kForward}), Error);
  EXPECT_EQ(one->new_group({0}, "dp").world_size(), 1);
}

// Every rank of a 2 x 2 x 2 grid: its coordinates and peers are Topology's,
// and its dp and tp groups sum over exactly Topology's members.
TEST(RankLayoutTest, EveryRankOfAGridHasTopologysCoordinatesAndGroups) {
  const topology::Topology grid(/*dp=*/2, /*pp=*/2, /*tp=*/2);
  std::vector<RankLayout> layouts(8);
  std::vector<double> dp_sums(8), tp_sums(8);
  std::vector<int> world_ranks(8);
  run_local_group(8, kTimeout, [&](Communicator& world) {
    const int r = world.rank();
    RankLayout layout = make_rank_layout(borrow(world), grid, /*local_rank=*/r % 4);
    world_ranks[r] = layout.world_rank();
    std::vector<torch::Tensor> d{torch::full({1}, std::pow(10.0, r), torch::kFloat64)};
    layout.dp->all_reduce_sum(d, "the dp test sum");
    dp_sums[r] = d[0].item<double>();
    std::vector<torch::Tensor> t{torch::full({1}, std::pow(10.0, r), torch::kFloat64)};
    layout.tp->all_reduce_sum(t, "the tp test sum");
    tp_sums[r] = t[0].item<double>();
    layout.world = nullptr;  // borrowed: gone with the thread
    layouts[r] = std::move(layout);
  });
  for (int r = 0; r < 8; ++r) {
    const RankLayout& l = layouts[r];
    EXPECT_EQ(world_ranks[r], r);
    EXPECT_EQ(l.local_rank, r % 4);
    EXPECT_TRUE(l.here == grid.coords(r)) << "rank " << r;
    for (int p = 0; p < 2; ++p) EXPECT_EQ(l.world_rank_of(p), grid.pp_group(r)[p]) << "rank " << r;
    double dp_expected = 0, tp_expected = 0;
    for (int m : grid.dp_group(r)) dp_expected += std::pow(10.0, m);
    for (int m : grid.tp_group(r)) tp_expected += std::pow(10.0, m);
    EXPECT_EQ(dp_sums[r], dp_expected) << "rank " << r;
    EXPECT_EQ(tp_sums[r], tp_expected) << "rank " << r;
  }
}

TEST(RankLayoutTest, GroupsOfOneAreSoloAndAGridOfAnotherSizeIsRefused) {
  run_local_group(2, kTimeout, [&](Communicator& world) {
    const RankLayout layout = make_rank_layout(borrow(world), topology::Topology(1, 2, 1));
    EXPECT_EQ(layout.dp->backend_name(), "solo");
    EXPECT_EQ(layout.tp->backend_name(), "solo");
    EXPECT_EQ(layout.world_rank_of(1 - world.rank()), 1 - world.rank());
    try {
      make_rank_layout(borrow(world), topology::Topology(2, 2, 1));
      ADD_FAILURE() << "a grid of 4 ranks was accepted over a world of 2";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("needs 4 ranks, but the world has 2"));
    }
  });
}

}  // namespace
}  // namespace baton::comm
