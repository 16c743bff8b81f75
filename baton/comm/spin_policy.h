// How long a waiting rank spins (yielding) before it sleeps on its doorbell.
//
// Spinning wins on an idle machine: a rank that sleeps pays tens of µs to
// wake, and a pipeline rank's waits are mostly shorter than a stage. It
// loses badly when the cores are oversubscribed: a spinning rank takes its
// full share of a core from the very peer it waits for, and, never asleep,
// it gets none of the scheduler's wake-up preference. Measured (hidden 16,
// m = 32, two busy co-runners, bench/RESULTS.md "Waiting under load"): 60 ms
// a step spinning up to 1 ms, the same spinning 50 µs, 18-31 ms never
// spinning; idle, the three are within noise.
//
// So the budget is, in order:
//   - 0 when the job alone oversubscribes the cores (same-host ranks x
//     intra-op threads > the cores this process may run on);
//   - 0 while the machine is busy: more runnable tasks than cores, from
//     /proc/loadavg, sampled at most every 20 ms while waiting and averaged
//     over about four samples (busy above cores + 0.5);
//   - else the cap (BATON_SHM_SPIN_US, default 1000 µs), cut to an eighth
//     for a peer whose recent waits mostly outlast the cap (spinning on
//     them is wasted, and a long wait hides a wake-up).
// Decision: learned and sampled rather than a flag, because the load of a
// shared machine changes within a run.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

namespace baton::comm::detail {

class SpinPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kSampleEvery{20};

  // `cores`: the CPUs this process may run on.
  SpinPolicy(int peers, std::chrono::microseconds cap, int cores);

  // How long a wait on `peer` should spin now.
  std::chrono::microseconds budget(int peer) const;
  // A wait on `peer` ended after `waited` (spinning, sleeping or both).
  void record(int peer, std::chrono::microseconds waited);
  // One reading of the machine's runnable tasks (including this one).
  void sample_runnable(double runnable);
  // true when a new reading is due at `now` (and notes that it is taken).
  bool sample_due(Clock::time_point now);

  // Same-host ranks x intra-op threads: the job's own demand for the cores.
  void set_job_threads(int threads) { job_oversubscribed_ = threads > cores_; }
  bool job_oversubscribed() const { return job_oversubscribed_; }
  bool machine_busy() const;

  // Runnable tasks now, from /proc/loadavg's fourth field ("running/total");
  // negative when it cannot be read.
  static double read_runnable();
  // CPUs in this process's affinity mask (at least 1).
  static int affinity_cores();

 private:
  const std::chrono::microseconds cap_;
  const int cores_;
  bool job_oversubscribed_ = false;
  double runnable_ = 0;  // average of the readings; 0 before the first
  bool sampled_ = false;
  Clock::time_point next_sample_{};
  std::vector<double> long_share_;  // per peer: share of recent waits past the cap
};

}  // namespace baton::comm::detail
