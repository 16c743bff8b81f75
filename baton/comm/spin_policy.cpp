#include "baton/comm/spin_policy.h"

#include <sched.h>

#include <cstdio>

namespace baton::comm::detail {
namespace {

constexpr double kAverage = 0.25;    // weight of a new reading or wait
constexpr double kLongShare = 0.5;   // above it, a peer's waits are mostly long
constexpr int kLongWaitDivisor = 8;  // the cap is cut to an eighth for such a peer

}  // namespace

SpinPolicy::SpinPolicy(int peers, std::chrono::microseconds cap, int cores)
    : cap_(cap),
      cores_(cores < 1 ? 1 : cores),
      long_share_(static_cast<size_t>(peers < 0 ? 0 : peers), 0.0) {}

bool SpinPolicy::machine_busy() const {
  return sampled_ && runnable_ > static_cast<double>(cores_) + 0.5;
}

std::chrono::microseconds SpinPolicy::budget(int peer) const {
  if (job_oversubscribed_ || machine_busy()) return std::chrono::microseconds(0);
  const bool mostly_long =
      peer >= 0 && static_cast<size_t>(peer) < long_share_.size() && long_share_[peer] > kLongShare;
  return mostly_long ? cap_ / kLongWaitDivisor : cap_;
}

void SpinPolicy::record(int peer, std::chrono::microseconds waited) {
  if (peer < 0 || static_cast<size_t>(peer) >= long_share_.size()) return;
  const double long_wait = waited > cap_ ? 1.0 : 0.0;
  long_share_[peer] += kAverage * (long_wait - long_share_[peer]);
}

void SpinPolicy::sample_runnable(double runnable) {
  if (runnable < 0) return;
  runnable_ = sampled_ ? runnable_ + kAverage * (runnable - runnable_) : runnable;
  sampled_ = true;
}

bool SpinPolicy::sample_due(Clock::time_point now) {
  if (now < next_sample_) return false;
  next_sample_ = now + kSampleEvery;
  return true;
}

double SpinPolicy::read_runnable() {
  std::FILE* file = std::fopen("/proc/loadavg", "r");
  if (file == nullptr) return -1;
  double one = 0, five = 0, fifteen = 0;
  int running = 0, total = 0;
  const int read = std::fscanf(file, "%lf %lf %lf %d/%d", &one, &five, &fifteen, &running, &total);
  std::fclose(file);
  return read == 5 ? static_cast<double>(running) : -1;
}

int SpinPolicy::affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int count = CPU_COUNT(&set);
  return count < 1 ? 1 : count;
}

}  // namespace baton::comm::detail
