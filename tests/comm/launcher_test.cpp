#include "baton/comm/launcher.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "baton/comm/blame.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace {

using namespace std::chrono_literals;
using testing::HasSubstr;

struct Captured {
  std::ostringstream out;
  std::ostringstream err;
  LaunchOptions options() {
    return LaunchOptions().set_out(&out).set_err(&err).set_grace_period(1s);
  }
};

int launch_sh(int nproc, const std::string& script, Captured& captured) {
  return launch_local(nproc, {"sh", "-c", script}, captured.options());
}

TEST(LauncherTest, AllRanksSucceedingReturnsZeroWithEveryLinePrefixedByItsRank) {
  Captured c;
  EXPECT_EQ(launch_sh(3, "echo hello $RANK; echo second $RANK; echo oops $RANK >&2", c), 0);
  for (int r = 0; r < 3; ++r) {
    const std::string rank = std::to_string(r);
    EXPECT_THAT(c.out.str(), HasSubstr("[rank " + rank + "] hello " + rank + "\n"));
    EXPECT_THAT(c.out.str(), HasSubstr("[rank " + rank + "] second " + rank + "\n"));
    EXPECT_THAT(c.err.str(), HasSubstr("[rank " + rank + "] oops " + rank + "\n"));
  }
  EXPECT_THAT(c.err.str(), testing::Not(HasSubstr("[launch]")));
}

TEST(LauncherTest, RanksSeeTheTorchrunEnvironment) {
  Captured c;
  ASSERT_EQ(
      launch_sh(2, "echo $RANK/$WORLD_SIZE/$LOCAL_RANK/$LOCAL_WORLD_SIZE@$MASTER_ADDR:$MASTER_PORT",
                c),
      0);
  EXPECT_THAT(c.out.str(),
              testing::ContainsRegex("\\[rank 0\\] 0/2/0/2@127\\.0\\.0\\.1:[1-9][0-9]*\n"));
  EXPECT_THAT(c.out.str(),
              testing::ContainsRegex("\\[rank 1\\] 1/2/1/2@127\\.0\\.0\\.1:[1-9][0-9]*\n"));
}

TEST(LauncherTest, OutputWithoutAFinalNewlineIsStillWritten) {
  Captured c;
  EXPECT_EQ(launch_sh(1, "printf 'no newline'", c), 0);
  EXPECT_EQ(c.out.str(), "[rank 0] no newline\n");
}

TEST(LauncherTest, OneRankFailingStopsTheOthersQuicklyAndIsNamed) {
  Captured c;
  const auto start = std::chrono::steady_clock::now();
  const int code = launch_sh(3, "if [ $RANK = 1 ]; then sleep 0.2; exit 3; fi; sleep 30", c);
  EXPECT_EQ(code, 3);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_THAT(
      c.err.str(),
      HasSubstr("[launch] rank 1 exited with code 3; stopping the 2 other running rank(s)\n"));
  EXPECT_THAT(c.err.str(), testing::Not(HasSubstr("[launch] rank 0")));
}

// Issue 7.6: `baton train --nproc 2 > /dev/full` trained on and exited 0.
TEST(LauncherTest, LostOutputStopsTheRanksAndReturnsOne) {
  Captured c;
  c.out.setstate(std::ios::badbit);  // as std::cout after a write to a full disk
  // A rank that is not stopped lives to leave its marker.
  const std::string marker =
      testing::TempDir() + "/launcher_test_lived_" + std::to_string(getpid());
  std::remove(marker.c_str());
  EXPECT_EQ(launch_sh(2, "echo step 1; sleep 30; touch " + marker, c), 1);
  EXPECT_NE(access(marker.c_str(), F_OK), 0) << "a rank ran to its end";
  std::remove(marker.c_str());
  EXPECT_THAT(c.err.str(), HasSubstr("[launch] cannot write the ranks' output to standard output"));
  EXPECT_THAT(c.err.str(), HasSubstr("; stopping the 2 running rank(s)\n"));
}

TEST(LauncherTest, OutputLostAsTheRanksExitStillReturnsOne) {
  Captured c;
  c.out.setstate(std::ios::badbit);
  EXPECT_EQ(launch_sh(2, "echo done", c), 1);
  EXPECT_THAT(c.err.str(), HasSubstr("[launch] cannot write the ranks' output to standard output"));
}

TEST(LauncherTest, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  Captured c;
  // Rank 0 fails only once rank 1 ignores SIGTERM.
  const std::string ready = testing::TempDir() + "/launcher_test_ready_" + std::to_string(getpid());
  std::remove(ready.c_str());
  const auto start = std::chrono::steady_clock::now();
  const int code = launch_sh(2,
                             "if [ $RANK = 0 ]; then while [ ! -f " + ready +
                                 " ]; do sleep 0.02; done; exit 5; fi; trap '' TERM; touch " +
                                 ready + "; sleep 30",
                             c);
  std::remove(ready.c_str());
  EXPECT_EQ(code, 5);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 900ms);  // waited for the 1 s grace period
  EXPECT_LT(took, 6s);
}

TEST(LauncherTest, RankKilledBySignalIsReportedWithTheSignal) {
  Captured c;
  LaunchOutcome outcome;
  EXPECT_EQ(launch_local(2, {"sh", "-c", "if [ $RANK = 1 ]; then kill -9 $$; fi; sleep 30"},
                         c.options().set_outcome(&outcome)),
            128 + 9);
  EXPECT_THAT(c.err.str(), HasSubstr("[launch] rank 1 was killed by signal 9"));
  // What --max-restarts reads: the rank and the launcher's line about it.
  EXPECT_EQ(outcome.failed_rank, 1);
  EXPECT_THAT(outcome.cause, testing::StartsWith("rank 1 was killed by signal 9"));
  EXPECT_FALSE(outcome.interrupted);
}

TEST(LauncherTest, TheOutcomeOfASuccessAndOfAnInterruptNamesNoRank) {
  Captured c;
  LaunchOutcome outcome;
  outcome.failed_rank = 7;
  EXPECT_EQ(launch_local(2, {"true"}, c.options().set_outcome(&outcome)), 0);
  EXPECT_EQ(outcome.failed_rank, -1);
  EXPECT_FALSE(outcome.interrupted);
  EXPECT_EQ(launch_local(2, {"sh", "-c", "if [ $RANK = 1 ]; then kill -TERM $PPID; fi; sleep 30"},
                         c.options().set_outcome(&outcome)),
            128 + SIGTERM);
  EXPECT_EQ(outcome.failed_rank, -1);
  EXPECT_TRUE(outcome.interrupted);
}

// launch_self runs this executable again with the program's own arguments.
TEST(LauncherTest, SelfCommandIsThisExecutableWithTheArgumentsAfterArgv0) {
  const char* argv[] = {"whatever-argv0-says", "--steps", "12", "x y"};
  const std::vector<std::string> command = self_command(4, argv);
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(command, (std::vector<std::string>{std::string(exe, static_cast<size_t>(n)), "--steps",
                                               "12", "x y"}));
  EXPECT_EQ(self_command(1, argv).size(), 1u);
}

// Issue 16.10: SIGTERM to the launcher gave 130, SIGINT's code.
TEST(LauncherTest, ASignalToTheLauncherStopsTheRanksAndReturns128PlusTheSignal) {
  for (const int signal : {SIGINT, SIGTERM}) {
    Captured c;
    const auto start = std::chrono::steady_clock::now();
    // Each rank is a child of the launcher, this process.
    const int code = launch_sh(
        2, "if [ $RANK = 1 ]; then kill -" + std::to_string(signal) + " $PPID; fi; sleep 30", c);
    EXPECT_EQ(code, 128 + signal);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
    EXPECT_THAT(c.err.str(),
                HasSubstr(std::string("[launch] interrupted by ") +
                          (signal == SIGINT ? "SIGINT" : "SIGTERM") + "; stopping 2 rank(s)\n"));
  }
}

// Issue 7.16: the rank that exits first is one that waited, not the culprit.
TEST(LauncherTest, TheRankTheOthersWaitedForIsNamedNotTheFirstToExit) {
  Captured c;
  const int code =
      launch_sh(4,
                "if [ $RANK = 2 ]; then sleep 30; fi; sleep 0.$RANK; echo \"[comm] rank $RANK "
                "timed out after "
                "1 s waiting for stage 1 micro-batch 0 RECV_F from rank 2\" >&2; exit 1",
                c);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(c.err.str(), HasSubstr("[launch] rank 2 stopped responding (ranks 0, 1, 3 timed out "
                                     "waiting for it); stopping the 1 other running rank(s)\n"));
  EXPECT_THAT(c.err.str(), testing::Not(HasSubstr("[launch] rank 0")));
}

TEST(LauncherTest, IndirectWaitsAreOutvotedByTheRanksNextToTheStuckOne) {
  Captured c;
  // Rank 0 waits on rank 1, which (like rank 3) waits on the stopped rank 2.
  const int code = launch_sh(
      4,
      "case $RANK in 2) sleep 30;; 0) peer=1;; *) peer=2;; esac; "
      "echo \"[comm] rank $RANK: peer rank $peer closed the connection while waiting for x\" >&2; "
      "exit 1",
      c);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(
      c.err.str(),
      HasSubstr("[launch] rank 2 stopped responding (ranks 0, 1, 3 failed waiting for it)"));
}

TEST(LauncherTest, AfterCollectiveTimeoutsTheRankThatNeverReportedIsNamed) {
  Captured c;
  const int code = launch_sh(
      3,
      "if [ $RANK = 1 ]; then sleep 30; fi; echo \"[comm] rank $RANK timed out after 1 s waiting "
      "for the step 4 loss sum (an all-reduce over ranks 0-2)\" >&2; exit 1",
      c);
  EXPECT_EQ(code, 1);
  EXPECT_THAT(
      c.err.str(),
      HasSubstr("[launch] rank 1 stopped responding (ranks 0, 2 timed out waiting for it)"));
}

TEST(LauncherTest, ACrashDuringTheBlameWindowIsNamedAsTheCause) {
  Captured c;
  const int code = launch_sh(
      2,
      "if [ $RANK = 1 ]; then sleep 0.3; kill -9 $$; fi; echo \"[comm] rank 0: peer rank 1 closed "
      "the connection while waiting for x\" >&2; exit 1",
      c);
  EXPECT_EQ(code, 128 + 9);
  EXPECT_THAT(c.err.str(), HasSubstr("[launch] rank 1 was killed by signal 9"));
}

TEST(BlameTest, AChainOfWaitsIsFollowedToTheRankThatWaitedForNoOne) {
  // Seen with rank 2 of 4 stopped: rank 3 was already in the loss all-reduce.
  const std::vector<RankReport> reports = {
      {0,
       true,
       {"[comm] rank 0 timed out after 3 s waiting for stage 0 micro-batch 3 RECV_B from rank 1"}},
      {1,
       true,
       {"[comm] rank 1 timed out after 3 s waiting for stage 1 micro-batch 3 RECV_B from rank 2"}},
      {2, false, {}},
      {3,
       true,
       {"[comm] rank 3 timed out after 3 s waiting for the step 9 loss sum (an all-reduce over "
        "ranks 0-3)"}}};
  EXPECT_EQ(stuck_ranks(reports), std::vector<int>{2});
  EXPECT_EQ(describe_stuck_ranks(reports),
            "rank 2 stopped responding (ranks 0, 1, 3 timed out waiting for it)");
}

TEST(BlameTest, ReadsThePeersAnErrorLineWaitedFor) {
  EXPECT_EQ(ranks_waited_for("[comm] rank 1 timed out after 5 s waiting for stage 2 micro-batch 3 "
                             "RECV_F from rank 0"),
            std::vector<int>{0});
  EXPECT_EQ(ranks_waited_for("[comm] rank 1: peer rank 12 closed the connection while waiting for "
                             "stage 2 micro-batch 3 SEND_B to rank 12"),
            std::vector<int>{12});
  EXPECT_EQ(ranks_waited_for("waiting for the loss from ranks 1, 3"), (std::vector<int>{1, 3}));
  EXPECT_EQ(ranks_waited_for("[comm] rank 0 timed out after 5 s waiting for the step 4 loss sum "
                             "(an all-reduce over ranks 0-3)"),
            std::vector<int>{});
  EXPECT_TRUE(is_wait_failure("[comm] rank 0 timed out after 5 s waiting for x"));
  EXPECT_FALSE(is_wait_failure("[train] rank 0: the loss of step 3 is nan"));
}

TEST(LauncherTest, MissingCommandFailsWithExitCode127) {
  Captured c;
  EXPECT_EQ(launch_local(1, {"/nonexistent/baton-command"}, c.options()), 127);
  EXPECT_THAT(c.err.str(), HasSubstr("[rank 0] cannot execute the command"));
}

class ScopedEnv {
 public:
  explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
    clear();
    for (const auto& [name, value] : vars) setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { clear(); }

 private:
  static void clear() {
    for (const char* name : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                             "MASTER_PORT", "TORCHELASTIC_USE_AGENT_STORE"}) {
      unsetenv(name);
    }
  }
};

TEST(RankEnvTest, NoRankVariablesMeansASingleProcessRun) {
  ScopedEnv env({});
  EXPECT_FALSE(rank_env_from_environment().has_value());
}

TEST(RankEnvTest, ReadsTorchrunVariables) {
  ScopedEnv env({{"RANK", "5"},
                 {"WORLD_SIZE", "8"},
                 {"LOCAL_RANK", "1"},
                 {"LOCAL_WORLD_SIZE", "4"},
                 {"MASTER_ADDR", "node0"},
                 {"MASTER_PORT", "29500"}});
  const auto rank_env = rank_env_from_environment();
  ASSERT_TRUE(rank_env.has_value());
  EXPECT_EQ(rank_env->rank, 5);
  EXPECT_EQ(rank_env->world_size, 8);
  EXPECT_EQ(rank_env->local_rank, 1);
  EXPECT_EQ(rank_env->local_world_size, 4);
  EXPECT_EQ(rank_env->master_addr, "node0");
  EXPECT_EQ(rank_env->master_port, 29500);
}

// Issue 7.17: torchrun 2.x's agent already serves MASTER_PORT, in a wire
// format LibTorch 1.13's TCPStore cannot join (2.x builds join it:
// agent_store_port).
TEST(RankEnvTest, UnderTorchrunsAgentStoreBatonsStoreTakesTheNextPort) {
  ScopedEnv env({{"RANK", "0"},
                 {"WORLD_SIZE", "2"},
                 {"MASTER_ADDR", "localhost"},
                 {"MASTER_PORT", "29500"},
                 {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_EQ(rank_env_from_environment()->master_port, 29501);
  EXPECT_EQ(rank_env_from_environment()->agent_store_port, 29500);
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  EXPECT_EQ(rank_env_from_environment()->master_port, 29500);
  EXPECT_EQ(rank_env_from_environment()->agent_store_port, 0);
}

TEST(RankEnvTest, LocalRankDefaultsToRankOnOneMachine) {
  ScopedEnv env({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}});
  EXPECT_EQ(rank_env_from_environment()->local_rank, 2);
  EXPECT_EQ(rank_env_from_environment()->local_world_size, 3);
}

TEST(RankEnvTest, MalformedValuesAreNamedWithTheirText) {
  const std::vector<std::pair<std::string, std::string>> base = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& name, const std::string& value) {
    auto vars = base;
    for (auto& [n, v] : vars) {
      if (n == name) v = value;
    }
    if (name == "LOCAL_RANK") vars.emplace_back(name, value);
    return vars;
  };
  struct Case {
    std::string name, value, message;
  };
  for (const Case& c : std::vector<Case>{
           {"RANK", "one", "RANK must be an integer in [0, WORLD_SIZE=2), got \"one\""},
           {"RANK", "2", "RANK must be an integer in [0, WORLD_SIZE=2), got \"2\""},
           {"WORLD_SIZE", "2x", "WORLD_SIZE must be an integer in [1, 1048576], got \"2x\""},
           {"MASTER_PORT", "70000", "MASTER_PORT must be an integer in [1, 65535], got \"70000\""},
           {"LOCAL_RANK", "-1",
            "LOCAL_RANK must be an integer in [0, LOCAL_WORLD_SIZE=2), got \"-1\""}}) {
    ScopedEnv env(with(c.name, c.value));
    EXPECT_THAT([] { rank_env_from_environment(); },
                testing::ThrowsMessage<Error>(HasSubstr(c.message)))
        << c.name << "=" << c.value;
  }
  ScopedEnv missing(std::vector<std::pair<std::string, std::string>>{{"RANK", "0"}});
  EXPECT_THAT([] { rank_env_from_environment(); },
              testing::ThrowsMessage<Error>(
                  HasSubstr("RANK and WORLD_SIZE must be set together, got RANK alone")));
}

}  // namespace
}  // namespace baton::comm
