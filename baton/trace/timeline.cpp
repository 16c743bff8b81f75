#include "baton/trace/timeline.h"

#include <algorithm>

namespace baton::trace {

double makespan(const Timeline& timeline) {
  double end = 0;
  for (const Event& e : timeline.events) end = std::max(end, e.end);
  return end;
}

std::vector<double> busy_time(const Timeline& timeline) {
  std::vector<double> busy(std::max(0, timeline.ranks), 0.0);
  for (const Event& e : timeline.events) {
    if (e.rank >= 0 && e.rank < timeline.ranks && schedule::is_compute(e.kind))
      busy[e.rank] += e.end - e.start;
  }
  return busy;
}

double bubble_fraction(const Timeline& timeline) {
  const double span = makespan(timeline);
  if (span <= 0 || timeline.ranks <= 0) return 0;
  double busy = 0;
  for (double b : busy_time(timeline)) busy += b;
  return 1.0 - busy / (timeline.ranks * span);
}

}  // namespace baton::trace
