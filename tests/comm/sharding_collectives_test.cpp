// The collectives ZeRO runs (runtime/zero.h): Communicator::all_gather_async
// brings every rank's tensor to every rank in rank order, and
// reduce_scatter_sum_async leaves rank r the r-th part of the sums, against
// sums computed here, on a world of three ranks (small messages, through
// shared memory for the reduce-scatter) and on a dp group of a 3 x 2 grid
// with messages large enough for Gloo (its reduce-scatter under LibTorch 2.x,
// an all-reduce whose part is kept under 1.13). Sizes that do not match are
// refused with one line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "baton/comm/local_group.h"
#include "baton/core/error.h"
#include "baton/topology/topology.h"

namespace baton::comm {
namespace {

using testing::HasSubstr;

const auto kTimeout = std::chrono::seconds(60);

// Rank r's input: element i is (r + 1) * (i + 1), so the sum over n ranks of
// element i is n (n + 1) / 2 * (i + 1).
torch::Tensor input_of(int rank, int64_t numel) {
  return torch::arange(1, numel + 1, torch::kFloat32) * (rank + 1);
}

void expect_collectives(Communicator& comm, int64_t part) {
  const int n = comm.world_size(), r = comm.rank();
  const std::vector<torch::Tensor> gathered =
      comm.all_gather_async(torch::full({part}, 1.0f + r), "the test gather").wait();
  ASSERT_EQ(static_cast<int>(gathered.size()), n);
  for (int q = 0; q < n; ++q)
    EXPECT_TRUE(torch::equal(gathered[q], torch::full({part}, 1.0f + q))) << "from rank " << q;
  torch::Tensor mine = torch::empty({part});
  comm.reduce_scatter_sum_async(input_of(r, n * part), mine, "the test reduce-scatter").wait();
  const torch::Tensor want =
      torch::arange(r * part + 1, (r + 1) * part + 1, torch::kFloat32) * (n * (n + 1) / 2.0f);
  EXPECT_TRUE(torch::equal(mine, want)) << "rank " << r;
}

TEST(ShardingCollectives, SmallMessagesOnAWorldOfThree) {
  run_local_group(3, kTimeout, [&](Communicator& world) { expect_collectives(world, 5); });
}

TEST(ShardingCollectives, LargeMessagesOnTheDpGroupsOfAThreeByTwoGrid) {
  const topology::Topology grid(/*dp=*/3, /*pp=*/2, /*tp=*/1);
  run_local_group(6, kTimeout, [&](Communicator& world) {
    Communicator dp = world.new_group(grid.dp_group(world.rank()), "dp");
    expect_collectives(dp, 40000);  // 480 KB in all: past the shared-memory sums
  });
}

TEST(ShardingCollectives, AReduceScatterOfMismatchedSizesIsRefused) {
  run_local_group(2, kTimeout, [&](Communicator& world) {
    torch::Tensor out = torch::empty({3});
    try {
      world.reduce_scatter_sum_async(torch::ones({5}), out, "odd");
      FAIL() << "5 elements for 2 x 3 were accepted";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("times the output's elements"));
    }
  });
}

}  // namespace
}  // namespace baton::comm
