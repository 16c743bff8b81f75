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

struct LaunchOptions {
  // Between SIGTERM and SIGKILL when the other ranks are stopped.
  std::chrono::milliseconds grace_period{5000};
  // MASTER_PORT for the ranks; 0 picks a free port.
  int master_port = 0;
  // Where the ranks' prefixed stdout and stderr lines, and the launcher's
  // own messages (on err), go. Must outlive launch_local.
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;

  LaunchOptions& set_grace_period(std::chrono::milliseconds v) {
    grace_period = v;
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
};

// Runs `argv` (argv[0] searched in PATH) as `nproc` processes with RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1 and
// MASTER_PORT set, and every line of rank r's stdout/stderr written to
// options.out/err as "[rank r] line". Each rank runs in its own process
// group. Returns 0 when all ranks exit 0. When a rank exits non-zero or dies
// by a signal, writes one line naming it to options.err, sends SIGTERM to
// the other ranks' process groups and SIGKILL after the grace period, and
// returns its exit code (128 + signal for a signal). SIGINT or SIGTERM to the
// launcher stops the ranks the same way and returns 130.
// Not thread-safe: it installs SIGINT/SIGTERM handlers while it runs.
int launch_local(int nproc, const std::vector<std::string>& argv,
                 const LaunchOptions& options = {});

// A TCP port on 127.0.0.1 that was free a moment ago.
int find_free_port();

}  // namespace baton::comm
