// glibc's malloc with baton's thresholds (core/allocator.h): a block that a
// loop frees and allocates again stays in the process, so its pages are
// faulted in once, not every time. Measured against the same loop in a
// process with glibc's defaults, by the kernel's count of minor page faults.
#include "baton/core/allocator.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

// A sanitizer's allocator replaces glibc's and ignores mallopt.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BATON_OWN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define BATON_OWN_ALLOCATOR 1
#endif
#endif

namespace baton {
namespace {

constexpr size_t kBlock = size_t{40} << 20;  // above glibc's largest own mmap threshold (32 MiB)
constexpr int kRounds = 10;

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The minor faults of kRounds rounds of malloc, touch and free of kBlock, in
// a child process (so that neither run sees the other's settings), tuned by
// keep_freed_memory() or not. -1 where the child failed.
long faults_of_loop(bool tuned) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (tuned && !keep_freed_memory()) _exit(3);
    const long before = minor_faults();
    for (int r = 0; r < kRounds; ++r) {
      auto* p = static_cast<volatile char*>(std::malloc(kBlock));
      if (p == nullptr) _exit(4);
      for (size_t i = 0; i < kBlock; i += 4096) p[i] = static_cast<char>(r);
      std::free(const_cast<char*>(p));
    }
    const long faults = minor_faults() - before;
    const ssize_t n = write(fds[1], &faults, sizeof faults);
    _exit(n == static_cast<ssize_t>(sizeof faults) ? 0 : 5);
  }
  close(fds[1]);
  long faults = -1;
  if (read(fds[0], &faults, sizeof faults) != static_cast<ssize_t>(sizeof faults)) faults = -1;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? faults : -1;
}

TEST(Allocator, AFreedBlockIsFaultedInOnceNotEveryRound) {
#if !defined(__GLIBC__) || defined(BATON_OWN_ALLOCATOR)
  GTEST_SKIP() << "not glibc's malloc";
#endif
  if (user_tunes_malloc(std::getenv("GLIBC_TUNABLES")))
    GTEST_SKIP() << "GLIBC_TUNABLES tunes malloc";
  const long pages = static_cast<long>(kBlock / 4096);
  const long untouched = faults_of_loop(false), kept = faults_of_loop(true);
  ASSERT_GE(untouched, 0);
  ASSERT_GE(kept, 0);
  // glibc's defaults map the block afresh each round: every page faults every round.
  EXPECT_GE(untouched, kRounds * pages * 9 / 10);
  // Kept: the first round's faults, and few after.
  EXPECT_LE(kept, 2 * pages) << "glibc's defaults: " << untouched;
}

TEST(Allocator, LeavesAUsersMallocTunablesAlone) {
  EXPECT_TRUE(user_tunes_malloc("glibc.malloc.trim_threshold=131072"));
  EXPECT_TRUE(user_tunes_malloc("glibc.cpu.hwcaps=-AVX2:glibc.malloc.arena_max=2"));
  EXPECT_FALSE(user_tunes_malloc("glibc.cpu.hwcaps=-AVX2"));
  EXPECT_FALSE(user_tunes_malloc(""));
  EXPECT_FALSE(user_tunes_malloc(nullptr));
}

}  // namespace
}  // namespace baton
