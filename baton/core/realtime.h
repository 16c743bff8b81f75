// Running a rank in the real-time scheduling class, for a machine other work
// shares (`baton train --realtime`).
//
// With one busy process beside a 2-rank job on 2 cores, the ranks lose the
// core at every wait: a rank woken by its peer's message, or one that has just
// finished an action, waits for the other process's time slice to end before
// it runs. The main job's measured bubble was up to 20 points above the
// simulated one that way. A lower nice value does not change it under the
// kernel's EEVDF scheduler (nice -5: 8.7-9.6 points); the real-time class
// SCHED_FIFO, which preempts an ordinary process at once, does (1.0-2.0
// points, as on an idle machine): bench/RESULTS.md, "Real-time ranks on a
// shared machine".
//
// Decision: off by default and never attempted silently. The class needs
// CAP_SYS_NICE or a real-time priority limit of at least 1 (`ulimit -r`,
// rtprio in /etc/security/limits.conf), and a real-time process takes the
// cores from everything of ordinary priority; the kernel's real-time
// throttling (sched_rt_runtime_us, 95% by default) keeps the rest of the
// machine alive.
#pragma once

#include <string>

namespace baton {

// The priority baton's ranks take in SCHED_FIFO: the lowest, above every
// ordinary process and below every other real-time one.
constexpr int kRealtimePriority = 1;

// Why this process may not enter SCHED_FIFO at kRealtimePriority (tried on a
// short-lived thread, so nothing changes), or "" when it may.
std::string realtime_refusal();

// Puts the calling thread, and the threads it starts from now on (intra-op,
// communication), in SCHED_FIFO at kRealtimePriority. Not SCHED_RESET_ON_FORK:
// that flag resets new threads too, not only new processes, and a rank starts
// no processes. Throws baton::Error with one line naming what is missing when
// it may not.
void run_realtime();

}  // namespace baton
