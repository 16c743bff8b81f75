// The dp x pp x tp grid against hand-written tables (Megatron-LM's order: tp
// fastest, then dp, then pp).
#include "baton/topology/topology.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "baton/core/error.h"

namespace baton::topology {
namespace {

using Groups = std::vector<std::vector<int>>;

struct Table {
  int dp, pp, tp;
  std::vector<Coords> coords;  // [rank]: {dp, pp, tp}
  Groups tp_groups, dp_groups, pp_groups;
};

std::string name(const Table& t) {
  return "dp" + std::to_string(t.dp) + "_pp" + std::to_string(t.pp) + "_tp" + std::to_string(t.tp);
}

const Table kTables[] = {
    {2,
     2,
     2,
     {{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}, {0, 1, 0}, {0, 1, 1}, {1, 1, 0}, {1, 1, 1}},
     {{0, 1}, {2, 3}, {4, 5}, {6, 7}},
     {{0, 2}, {1, 3}, {4, 6}, {5, 7}},
     {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
    {2,
     1,
     2,
     {{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}},
     {{0, 1}, {2, 3}},
     {{0, 2}, {1, 3}},
     {{0}, {1}, {2}, {3}}},
    {1,
     2,
     2,
     {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1}},
     {{0, 1}, {2, 3}},
     {{0}, {1}, {2}, {3}},
     {{0, 2}, {1, 3}}},
    {2,
     2,
     1,
     {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}},
     {{0}, {1}, {2}, {3}},
     {{0, 1}, {2, 3}},
     {{0, 2}, {1, 3}}},
    {1, 3, 1, {{0, 0, 0}, {0, 1, 0}, {0, 2, 0}}, {{0}, {1}, {2}}, {{0}, {1}, {2}}, {{0, 1, 2}}},
    {3,
     1,
     2,
     {{0, 0, 0}, {0, 0, 1}, {1, 0, 0}, {1, 0, 1}, {2, 0, 0}, {2, 0, 1}},
     {{0, 1}, {2, 3}, {4, 5}},
     {{0, 2, 4}, {1, 3, 5}},
     {{0}, {1}, {2}, {3}, {4}, {5}}},
};

class TopologyTable : public ::testing::TestWithParam<Table> {};

TEST_P(TopologyTable, CoordinatesMatchTheTableBothWays) {
  const Table& t = GetParam();
  const Topology topo(t.dp, t.pp, t.tp);
  ASSERT_EQ(topo.world_size(), static_cast<int>(t.coords.size()));
  for (int r = 0; r < topo.world_size(); ++r) {
    const Coords c = topo.coords(r);
    EXPECT_TRUE(c == t.coords[r]) << "rank " << r << ": got dp " << c.dp << " pp " << c.pp << " tp "
                                  << c.tp;
    EXPECT_EQ(topo.rank(t.coords[r]), r);
  }
}

TEST_P(TopologyTable, GroupsMatchTheTable) {
  const Table& t = GetParam();
  const Topology topo(t.dp, t.pp, t.tp);
  EXPECT_EQ(topo.groups(GroupKind::Tp), t.tp_groups);
  EXPECT_EQ(topo.groups(GroupKind::Dp), t.dp_groups);
  EXPECT_EQ(topo.groups(GroupKind::Pp), t.pp_groups);
}

TEST_P(TopologyTable, EachRanksGroupIsTheTableGroupHoldingIt) {
  const Table& t = GetParam();
  const Topology topo(t.dp, t.pp, t.tp);
  auto holding = [](const Groups& groups, int r) {
    for (const auto& g : groups)
      for (int member : g)
        if (member == r) return g;
    return std::vector<int>{};
  };
  for (int r = 0; r < topo.world_size(); ++r) {
    EXPECT_EQ(topo.tp_group(r), holding(t.tp_groups, r)) << "rank " << r;
    EXPECT_EQ(topo.dp_group(r), holding(t.dp_groups, r)) << "rank " << r;
    EXPECT_EQ(topo.pp_group(r), holding(t.pp_groups, r)) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(HandWritten, TopologyTable, ::testing::ValuesIn(kTables),
                         [](const auto& info) { return name(info.param); });

// Beyond the tables: every kind partitions the world, into groups of its size.
TEST(Topology, EveryKindOfGroupPartitionsTheWorld) {
  for (int dp : {1, 2, 3, 4})
    for (int pp : {1, 2, 5})
      for (int tp : {1, 2, 8}) {
        const Topology topo(dp, pp, tp);
        for (GroupKind kind : {GroupKind::Tp, GroupKind::Dp, GroupKind::Pp}) {
          const int size = kind == GroupKind::Tp ? tp : kind == GroupKind::Dp ? dp : pp;
          std::set<int> seen;
          const Groups groups = topo.groups(kind);
          EXPECT_EQ(static_cast<int>(groups.size()), dp * pp * tp / size);
          for (const auto& g : groups) {
            EXPECT_EQ(static_cast<int>(g.size()), size);
            seen.insert(g.begin(), g.end());
          }
          EXPECT_EQ(static_cast<int>(seen.size()), dp * pp * tp);
        }
      }
}

TEST(Topology, TensorParallelPeersAreNeighbouringRanks) {
  const Topology topo(2, 4, 8);
  for (int r = 0; r < topo.world_size(); ++r) {
    const auto g = topo.tp_group(r);
    EXPECT_EQ(g.back() - g.front(), 7) << "rank " << r;
  }
}

std::string error_of(int dp, int pp, int tp) {
  try {
    Topology(dp, pp, tp);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Topology, RefusesSizesBelowOneNamingAllThree) {
  EXPECT_EQ(error_of(0, 2, 2),
            "[topology] the grid dp=0 x pp=2 x tp=2 needs every size >= 1 and at most 1048576 "
            "ranks in all");
  EXPECT_THAT(error_of(2, -1, 2), ::testing::HasSubstr("dp=2 x pp=-1 x tp=2"));
  EXPECT_THAT(error_of(2, 2, 0), ::testing::HasSubstr("dp=2 x pp=2 x tp=0"));
}

TEST(Topology, RefusesAWorldPastTheLimitWithoutOverflowing) {
  EXPECT_THAT(error_of(1 << 20, 1 << 20, 1 << 20),
              ::testing::HasSubstr("dp=1048576 x pp=1048576 x tp=1048576"));
  EXPECT_THAT(error_of(1 << 11, 1 << 10, 1), ::testing::HasSubstr("at most 1048576"));
  EXPECT_EQ(Topology(1 << 10, 1 << 10, 1).world_size(), 1 << 20);
}

TEST(Topology, RefusesRanksAndCoordinatesOutsideTheGrid) {
  const Topology topo(2, 2, 2);
  EXPECT_THROW(topo.coords(8), Error);
  EXPECT_THROW(topo.coords(-1), Error);
  EXPECT_THROW(topo.rank(Coords{2, 0, 0}), Error);
  try {
    topo.check_world_size(4);
    FAIL() << "expected a throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "[topology] the grid dp=2 x pp=2 x tp=2 needs 8 ranks, but the world has 4");
  }
  EXPECT_NO_THROW(topo.check_world_size(8));
}

}  // namespace
}  // namespace baton::topology
