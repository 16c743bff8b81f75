#include "baton/trace/timeline.h"

#include <algorithm>
#include <utility>

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

Reductions reductions_of_rank(const std::vector<Event>& events, int rank) {
  std::vector<std::pair<double, double>> spans;
  double last_compute = 0, last_reduction = 0;
  for (const Event& e : events) {
    if (e.rank != rank) continue;
    if (schedule::is_grad_reduction(e.kind)) {
      spans.emplace_back(e.start, e.end);
      last_reduction = std::max(last_reduction, e.end);
    } else if (schedule::is_compute(e.kind)) {
      last_compute = std::max(last_compute, e.end);
    }
  }
  Reductions out;
  if (spans.empty()) return out;
  std::sort(spans.begin(), spans.end());
  double from = spans[0].first, to = spans[0].second;
  for (const auto& [start, end] : spans) {
    if (start > to) {
      out.total += to - from;
      from = start;
    }
    to = std::max(to, end);
  }
  out.total += to - from;
  out.exposed = std::max(0.0, last_reduction - last_compute);
  return out;
}

}  // namespace baton::trace
