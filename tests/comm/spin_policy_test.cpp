#include "baton/comm/spin_policy.h"

#include <chrono>

#include <gtest/gtest.h>

namespace baton::comm::detail {
namespace {

using std::chrono::microseconds;

TEST(SpinPolicyTest, SpinsTheCapOnAnIdleMachine) {
  SpinPolicy policy(2, microseconds(1000), 2);
  EXPECT_EQ(policy.budget(1), microseconds(1000));  // no reading yet: assume idle
  policy.sample_runnable(2);                        // both ranks running, nothing else
  EXPECT_FALSE(policy.machine_busy());
  EXPECT_EQ(policy.budget(1), microseconds(1000));
}

TEST(SpinPolicyTest, NeverSpinsWhileMoreTasksAreRunnableThanCores) {
  SpinPolicy policy(2, microseconds(1000), 2);
  policy.sample_runnable(4);  // two ranks and two co-runners on two cores
  EXPECT_TRUE(policy.machine_busy());
  EXPECT_EQ(policy.budget(1), microseconds(0));
  // The average needs about four idle readings to call the machine free
  // again: 4, then 2 three times, is 2.84 > 2.5; a fourth makes it 2.63,
  // a fifth 2.47.
  for (int i = 0; i < 4; ++i) policy.sample_runnable(2);
  EXPECT_TRUE(policy.machine_busy());
  policy.sample_runnable(2);
  EXPECT_FALSE(policy.machine_busy());
  EXPECT_EQ(policy.budget(1), microseconds(1000));
}

TEST(SpinPolicyTest, NeverSpinsWhenTheJobAloneOversubscribesTheCores) {
  SpinPolicy policy(2, microseconds(1000), 2);
  policy.set_job_threads(2);  // 2 ranks x 1 thread on 2 cores: fits
  EXPECT_EQ(policy.budget(0), microseconds(1000));
  policy.set_job_threads(4);  // 2 ranks x --threads 2 on 2 cores
  EXPECT_TRUE(policy.job_oversubscribed());
  EXPECT_EQ(policy.budget(0), microseconds(0));
}

TEST(SpinPolicyTest, CutsTheSpinForAPeerWhoseWaitsMostlyOutlastIt) {
  SpinPolicy policy(3, microseconds(800), 4);
  // Share of long waits: 0.25, 0.4375, 0.578 after three waits past the cap.
  policy.record(1, microseconds(5000));
  policy.record(1, microseconds(5000));
  EXPECT_EQ(policy.budget(1), microseconds(800));
  policy.record(1, microseconds(5000));
  EXPECT_EQ(policy.budget(1), microseconds(100));  // an eighth
  EXPECT_EQ(policy.budget(2), microseconds(800));  // other peers keep theirs
  // Short waits bring it back: 0.578 * 0.75 = 0.434 after one.
  policy.record(1, microseconds(20));
  EXPECT_EQ(policy.budget(1), microseconds(800));
}

TEST(SpinPolicyTest, SamplesAtMostEveryTwentyMilliseconds) {
  SpinPolicy policy(2, microseconds(1000), 2);
  const auto t0 = SpinPolicy::Clock::now();
  EXPECT_TRUE(policy.sample_due(t0));
  EXPECT_FALSE(policy.sample_due(t0 + std::chrono::milliseconds(19)));
  EXPECT_TRUE(policy.sample_due(t0 + std::chrono::milliseconds(20)));
}

TEST(SpinPolicyTest, ReadsTheMachine) {
  // This test's own thread is running, so at least 1 runnable task.
  EXPECT_GE(SpinPolicy::read_runnable(), 1.0);
  EXPECT_GE(SpinPolicy::affinity_cores(), 1);
}

}  // namespace
}  // namespace baton::comm::detail
