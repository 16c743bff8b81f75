#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "baton/trace/event_label.h"
#include "baton/trace/writers.h"

namespace baton::trace {
namespace {

// A measured timeline may hold one very short event; past this many columns
// the column widens so the grid still fits a terminal's scrollback.
constexpr double kMaxColumns = 1000;

// The grid draws compute, and gradient reductions on a row of their own: a
// measured send or receive overlaps the compute around it and would shift
// every later cell of its rank.
bool drawn(const Event& e) {
  return schedule::is_compute(e.kind) && e.end > e.start;
}

// "R0": REDUCE_GRAD (or REDUCE_SCATTER) of bucket 0 ("1R0" with the stage);
// "T0": REDUCE_TIED of tie group 0; "C0": CLIP_NORM; "U0", "X0": UNSHARD and
// RESHARD. Kept short so that the columns stay as narrow as the compute
// labels.
std::string reduction_label(const Event& e, bool with_stage) {
  return (with_stage ? std::to_string(e.stage) : std::string()) +
         (e.kind == schedule::ActionKind::REDUCE_TIED ? "T"
          : e.kind == schedule::ActionKind::CLIP_NORM ? "C"
          : e.kind == schedule::ActionKind::UNSHARD   ? "U"
          : e.kind == schedule::ActionKind::RESHARD   ? "X"
                                                      : "R") +
         std::to_string(e.microbatch);
}

// The shortest drawn event's duration, or 0 when none is drawn.
double shortest_duration(const Timeline& timeline) {
  double shortest = std::numeric_limits<double>::infinity();
  for (const Event& e : timeline.events) {
    if (drawn(e)) shortest = std::min(shortest, e.end - e.start);
  }
  return std::isinf(shortest) ? 0 : shortest;
}

long to_cells(double time, double column) {
  return std::lround(time / column);
}

}  // namespace

std::string to_grid(const Timeline& timeline) {
  detail::check_events(timeline, "trace.to_grid");
  const bool with_stage = detail::several_stages_per_rank(timeline);
  double column = shortest_duration(timeline);
  if (column > 0) column = std::max(column, makespan(timeline) / kMaxColumns);

  // Each event's cells start where its start rounds to, or right after the
  // rank's previous event when rounding would make the two overlap.
  std::vector<Event> events = timeline.events;
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.start < b.start; });
  // Rows 2r (rank r's compute) and 2r + 1 (its reductions).
  std::vector<std::vector<std::string>> cells(2 * static_cast<size_t>(timeline.ranks));
  size_t cell_width = 1;
  for (const Event& e : events) {
    const bool reduction = schedule::is_step_action(e.kind);
    if (!drawn(e) && !reduction) continue;
    std::vector<std::string>& row = cells[2 * static_cast<size_t>(e.rank) + reduction];
    const size_t first = std::max<size_t>(column > 0 ? to_cells(e.start, column) : 0, row.size());
    const size_t count = column > 0 ? std::max<long>(1, to_cells(e.end - e.start, column)) : 1;
    const std::string label =
        reduction ? reduction_label(e, with_stage) : detail::event_label(e, with_stage);
    cell_width = std::max(cell_width, label.size());
    row.resize(first, ".");
    row.insert(row.end(), count, label);
  }
  size_t columns = 0;
  for (const auto& row : cells) columns = std::max(columns, row.size());
  for (auto& row : cells) row.resize(columns, ".");

  const std::string last_rank = std::to_string(std::max(0, timeline.ranks - 1));
  std::ostringstream out;
  for (size_t row = 0; row < cells.size(); ++row) {
    const int r = static_cast<int>(row / 2);
    const bool reductions = row % 2 == 1;
    if (reductions && std::all_of(cells[row].begin(), cells[row].end(),
                                  [](const std::string& c) { return c == "."; }))
      continue;
    std::string line = reductions ? std::string("dp") : "rank " + std::to_string(r);
    const size_t width = 5 + last_rank.size();
    if (reductions) line.insert(0, width - line.size(), ' ');  // right-aligned under "rank r"
    line.append(width - line.size(), ' ');
    line += " |";
    for (const std::string& cell : cells[row]) {
      line += ' ';
      line += cell;
      line.append(cell_width - cell.size(), ' ');
    }
    while (line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
  return out.str();
}

}  // namespace baton::trace
