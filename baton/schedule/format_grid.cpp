// format_grid (declared in text_format.h): the grid a validation error shows.
// A schedule file may hold millions of actions, so a large grid is cut to the
// neighbourhood of the marked actions and the text is bounded.
#include <algorithm>
#include <set>
#include <sstream>

#include "baton/schedule/text_format.h"

namespace baton::schedule {
namespace {

// Up to this size a grid is shown whole.
constexpr size_t kWholeRanks = 16;
constexpr size_t kWholeColumns = 32;
// Otherwise: the ranks and columns this close to one of the first
// kWindowedMarks marks, and at most kMaxGridBytes of text.
constexpr int kRanksAround = 2;
constexpr size_t kColumnsAround = 8;
constexpr size_t kWindowedMarks = 8;
constexpr size_t kMaxGridBytes = 16 * 1024;
constexpr std::string_view kElided = "...";

using Marks = std::vector<std::pair<int, size_t>>;

// The ranks to show, ascending.
std::vector<int> shown_ranks(const Schedule& schedule, const Marks& anchors) {
  const int ranks = static_cast<int>(schedule.actions.size());
  std::set<int> rows;
  if (static_cast<size_t>(ranks) <= kWholeRanks) {
    for (int r = 0; r < ranks; ++r) rows.insert(r);
  } else {
    for (const auto& [rank, index] : anchors)
      for (int r = std::max(0, rank - kRanksAround); r <= std::min(ranks - 1, rank + kRanksAround);
           ++r)
        rows.insert(r);
  }
  return {rows.begin(), rows.end()};
}

// The columns to show, ascending.
std::vector<size_t> shown_columns(const Schedule& schedule, const std::vector<int>& rows,
                                  const Marks& anchors) {
  size_t longest = 0;
  for (int r : rows) longest = std::max(longest, schedule.actions[r].size());
  std::set<size_t> columns;
  if (longest <= kWholeColumns) {
    for (size_t c = 0; c < longest; ++c) columns.insert(c);
  } else {
    for (const auto& [rank, index] : anchors) {
      const size_t first = index > kColumnsAround ? index - kColumnsAround : 0;
      for (size_t c = first; c <= index + kColumnsAround && c < longest; ++c) columns.insert(c);
    }
  }
  return {columns.begin(), columns.end()};
}

}  // namespace

std::string format_grid(const Schedule& schedule, const Marks& marks) {
  const std::set<std::pair<int, size_t>> marked(marks.begin(), marks.end());
  Marks anchors;
  for (const auto& mark : marks) {
    if (mark.first < 0 || static_cast<size_t>(mark.first) >= schedule.actions.size()) continue;
    if (std::find(anchors.begin(), anchors.end(), mark) != anchors.end()) continue;
    if (anchors.size() == kWindowedMarks) break;
    anchors.push_back(mark);
  }
  if (anchors.empty()) anchors.push_back({0, 0});
  const std::vector<int> rows = shown_ranks(schedule, anchors);
  const std::vector<size_t> columns = shown_columns(schedule, rows, anchors);

  size_t width = kElided.size() + 2;
  for (int r : rows)
    for (size_t c : columns)
      if (c < schedule.actions[r].size())
        width = std::max(width, to_string(schedule.actions[r][c]).size() + 2);
  auto pad = [width](std::string cell) {
    cell.append(width - cell.size(), ' ');
    return cell;
  };

  std::ostringstream out;
  size_t bytes = 0;
  const int label_width = static_cast<int>(std::to_string(schedule.actions.size()).size());
  int previous_rank = -1;
  for (int r : rows) {
    if (r != previous_rank + 1) out << kElided << "\n";
    previous_rank = r;
    std::string row = "rank " + std::to_string(r);
    row.append(label_width - std::to_string(r).size(), ' ');
    row += " |";
    const auto& list = schedule.actions[r];
    size_t next = 0;  // the column after the last one drawn
    for (size_t c : columns) {
      if (c >= list.size()) break;
      if (c != next) row += pad(" " + std::string(kElided));
      std::string cell = to_string(list[c]);
      cell = marked.count({r, c}) ? ">" + cell + "<" : " " + cell + " ";
      row += pad(std::move(cell));
      next = c + 1;
    }
    if (next < list.size()) row += " " + std::string(kElided);
    while (!row.empty() && row.back() == ' ') row.pop_back();
    bytes += row.size() + 1;
    if (bytes > kMaxGridBytes) {
      out << kElided << " (grid cut at " << kMaxGridBytes / 1024 << " KiB)\n";
      return out.str();
    }
    out << row << "\n";
  }
  if (previous_rank + 1 < static_cast<int>(schedule.actions.size())) out << kElided << "\n";
  return out.str();
}

}  // namespace baton::schedule
