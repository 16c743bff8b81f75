#include "baton/core/realtime.h"

#include "baton/core/error.h"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace baton {
namespace {

// Errno of putting the calling thread in SCHED_FIFO, 0 on success.
int enter_fifo() {
  sched_param param{};
  param.sched_priority = kRealtimePriority;
  return sched_setscheduler(0, SCHED_FIFO, &param) == 0 ? 0 : errno;
}

std::string refusal_for(int error) {
  if (error == 0) return "";
  return detail::concat(
      "[core.realtime] this process may not run in the real-time class SCHED_FIFO (",
      std::strerror(error), "): it needs CAP_SYS_NICE or a real-time priority limit of at least ",
      kRealtimePriority,
      " (ulimit -r; rtprio in /etc/security/limits.conf); run without --realtime");
}

}  // namespace

std::string realtime_refusal() {
  int error = 0;
  // Linux schedules threads: the policy set here dies with the thread.
  std::thread probe([&error] { error = enter_fifo(); });
  probe.join();
  return refusal_for(error);
}

void run_realtime() {
  const std::string refusal = refusal_for(enter_fifo());
  BATON_CHECK(refusal.empty(), refusal);
}

}  // namespace baton
