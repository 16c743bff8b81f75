// A local launcher: runs one command as N ranks on this machine, the way
// `torchrun --nproc-per-node N` would, with every output line prefixed by
// its rank and the whole job stopped when one rank fails.
#pragma once

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "baton/comm/rank_env.h"

namespace baton::comm {

// Why a launch ended, for a caller that restarts it (baton train --max-restarts).
struct LaunchOutcome {
  // The rank named as the cause ("rank 1 was killed by signal 9 (SIGKILL)"),
  // -1 when none failed or the launcher itself was stopped.
  int failed_rank = -1;
  std::string cause;         // the launcher's line naming it, without "[launch] "
  bool interrupted = false;  // SIGINT or SIGTERM reached the launcher
};

struct LaunchOptions {
  // Between SIGTERM and SIGKILL when the other ranks are stopped.
  std::chrono::milliseconds grace_period{5000};
  // After a rank fails waiting on a peer (a timeout, a lost connection), how
  // long the others may take to report whom they waited on before they are
  // stopped and the culprit is named.
  std::chrono::milliseconds blame_window{2000};
  // MASTER_PORT for the ranks; 0 picks a free port.
  int master_port = 0;
  // Where the ranks' prefixed stdout and stderr lines, and the launcher's
  // own messages (on err), go. Must outlive launch_local.
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;
  // When set, filled in before launch_local returns. Must outlive it.
  LaunchOutcome* outcome = nullptr;

  LaunchOptions& set_grace_period(std::chrono::milliseconds v) {
    grace_period = v;
    return *this;
  }
  LaunchOptions& set_blame_window(std::chrono::milliseconds v) {
    blame_window = v;
    return *this;
  }
  LaunchOptions& set_master_port(int v) {
    master_port = v;
    return *this;
  }
  LaunchOptions& set_out(std::ostream* v) {
    out = v;
    return *this;
  }
  LaunchOptions& set_err(std::ostream* v) {
    err = v;
    return *this;
  }
  LaunchOptions& set_outcome(LaunchOutcome* v) {
    outcome = v;
    return *this;
  }
};

// Runs `argv` (argv[0] searched in PATH) as `nproc` processes with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and
// MASTER_PORT set, and every line of rank r's stdout/stderr written to
// options.out/err as "[rank r] line". Each rank runs in its own process
// group and dies with the launcher (PR_SET_PDEATHSIG, SIGKILL), so a killed
// launcher leaves no rank behind. When a rank exits non-zero or dies by a
// signal, writes one line naming it to options.err, sends SIGTERM (and
// SIGCONT) to the other ranks' process groups and SIGKILL after the grace
// period. When that rank failed waiting on a peer (its stderr says "timed
// out" or "closed the connection"), the launcher first lets the others report
// for options.blame_window, then names the rank they waited on (see blame.h):
// "rank 2 stopped responding (ranks 0, 1, 3 timed out waiting for it)".
// SIGINT or SIGTERM to the launcher stops the ranks the same way. When
// options.out fails (its stream goes bad: a full disk), writes "[launch]
// cannot write the ranks' output to standard output: <why>" to options.err
// and stops the ranks the same way.
// Returns, after every rank has exited, by the first cause (ranks stopped by
// the launcher count for nothing):
//   0        every rank exited 0;
//   c        the failed rank's exit code c (baton's ranks: 1 a runtime fault);
//   128 + N  that rank was killed by signal N (137 for SIGKILL), or the
//            launcher received signal N (130 SIGINT, 143 SIGTERM), as a
//            shell reports a command that a signal stopped;
//   1        the ranks' output could not be written.
// A stuck rank that the others waited on fails by the first waiter's code.
// A rank that exits 2 (bad input it found and said; the others find it too)
// gets no line: the other ranks have the grace period to exit on their own
// before SIGKILL, and the job returns 2.
// Not thread-safe: it installs SIGINT/SIGTERM handlers while it runs, and the
// calling thread must outlive the ranks (their parent-death signal follows it).
int launch_local(int nproc, const std::vector<std::string>& argv,
                 const LaunchOptions& options = {});

// This program, as launch_local runs it again: the running executable
// (/proc/self/exe, whatever argv[0] says) followed by argv[1..argc-1], the
// arguments it was given. Throws baton::Error when the executable cannot be
// found.
std::vector<std::string> self_command(int argc, const char* const* argv);

// Runs this program as `nproc` ranks with its own arguments (self_command):
// the usual start of a program that launches itself,
//   if (!std::getenv("RANK")) return baton::comm::launch_self(2, argc, argv);
int launch_self(int nproc, int argc, const char* const* argv, const LaunchOptions& options = {});

// A TCP port on 127.0.0.1 that was free a moment ago.
int find_free_port();

}  // namespace baton::comm
