// A rank's place in the job travels from the environment to the pipeline
// unchanged: `baton train --device cuda --nproc 4` once put every rank on
// cuda:0, because the local rank was dropped on the way.
#include "baton/train/trainer.h"

#include <gtest/gtest.h>

#include "baton/comm/device_choice.h"

namespace baton::train {
namespace {

comm::RankEnv env_of(int rank) {
  comm::RankEnv env;
  env.rank = 4 + rank;
  env.world_size = 8;
  env.local_rank = rank;
  env.local_world_size = 4;
  env.master_addr = "10.0.0.7";
  env.master_port = 29611;
  return env;
}

class RankContextTest : public testing::TestWithParam<int> {};

TEST_P(RankContextTest, ARankEnvComesBackUnchanged) {
  const comm::RankEnv env = env_of(GetParam());
  const comm::RankEnv back = RankContext::from_env(env).rank_env();
  EXPECT_EQ(back.rank, env.rank);
  EXPECT_EQ(back.world_size, env.world_size);
  EXPECT_EQ(back.local_rank, env.local_rank);
  EXPECT_EQ(back.local_world_size, env.local_world_size);
  EXPECT_EQ(back.master_addr, env.master_addr);
  EXPECT_EQ(back.master_port, env.master_port);
}

TEST_P(RankContextTest, EachLocalRankRunsOnItsOwnGpu) {
  const int local_rank = GetParam();
  const comm::RankEnv env = RankContext::from_env(env_of(local_rank)).rank_env();
  EXPECT_EQ(comm::device_for_local_rank(c10::Device(c10::kCUDA), env.local_rank, 4),
            c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank)));
}

INSTANTIATE_TEST_SUITE_P(LocalRank, RankContextTest, testing::Range(0, 4));

}  // namespace
}  // namespace baton::train
