// SCHED_FIFO for a rank (core/realtime.h): the kernel's own view of the
// calling thread's class (sched_getscheduler) is the independent source; each
// case runs in a child process so the test runner keeps its class.
#include "baton/core/realtime.h"

#include "baton/core/error.h"

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace baton {
namespace {

int policy_of_calling_thread() {
  return sched_getscheduler(0);
}

// Runs `body` in a child process; its return value is the child's exit code.
template <typename Body>
int in_child(Body body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Takes CAP_SYS_NICE away from this process and sets its real-time priority
// limit to 0: what an ordinary user's process has. False where it could not.
bool drop_realtime_rights() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  const unsigned bit = 1u << (CAP_SYS_NICE % 32);
  data[CAP_SYS_NICE / 32].effective &= ~bit;
  data[CAP_SYS_NICE / 32].permitted &= ~bit;
  data[CAP_SYS_NICE / 32].inheritable &= ~bit;
  if (syscall(SYS_capset, &header, data) != 0) return false;
  const rlimit none{0, 0};
  return setrlimit(RLIMIT_RTPRIO, &none) == 0;
}

TEST(Realtime, TheProbeLeavesTheCallersClassAlone) {
  const int before = policy_of_calling_thread();
  realtime_refusal();
  EXPECT_EQ(policy_of_calling_thread(), before);
}

TEST(Realtime, WithoutTheRightsItIsRefusedInOneLineNamingWhatIsMissing) {
  const int code = in_child([] {
    if (!drop_realtime_rights()) return 10;
    const std::string refusal = realtime_refusal();
    if (refusal.find("CAP_SYS_NICE") == std::string::npos) return 11;
    if (refusal.find("ulimit -r") == std::string::npos) return 12;
    if (refusal.find('\n') != std::string::npos) return 13;
    try {
      run_realtime();
      return 14;
    } catch (const Error& e) {
      if (std::string(e.what()) != refusal) return 15;
    }
    return policy_of_calling_thread() == SCHED_OTHER ? 0 : 16;
  });
  EXPECT_EQ(code, 0);
}

TEST(Realtime, TheRankAndTheThreadsItStartsLaterRunInSchedFifo) {
  if (!realtime_refusal().empty()) {
    GTEST_SKIP() << "this process may not use SCHED_FIFO: " << realtime_refusal();
  }
  const int code = in_child([] {
    int earlier_policy = -1;
    std::thread earlier([&earlier_policy] {
      // Started before: stays in the ordinary class.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      earlier_policy = policy_of_calling_thread();
    });
    run_realtime();
    if (policy_of_calling_thread() != SCHED_FIFO) return 20;
    sched_param param{};
    if (sched_getparam(0, &param) != 0 || param.sched_priority != kRealtimePriority) return 21;
    int later_policy = -1;
    std::thread([&later_policy] { later_policy = policy_of_calling_thread(); }).join();
    earlier.join();
    if (later_policy != SCHED_FIFO) return 22;
    return earlier_policy == SCHED_OTHER ? 0 : 23;
  });
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace baton
