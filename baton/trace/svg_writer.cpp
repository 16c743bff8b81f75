#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>
#include <vector>

#include "baton/trace/event_label.h"
#include "baton/trace/svg_palette.h"
#include "baton/trace/writers.h"

namespace baton::trace {
namespace {

using schedule::ActionKind;

constexpr double kLeft = 72;  // room for "rank 12"
constexpr double kRight = 28;
constexpr double kTop = 48;  // the title
constexpr double kRowHeight = 30;
constexpr double kRowGap = 6;
constexpr double kAxisHeight = 42;  // ticks, their labels, the axis name
constexpr double kLegendHeight = 34;
constexpr double kShortestBoxPx = 26;  // wide enough for "31" in 11px bold
constexpr double kMinPlotPx = 480;
constexpr double kMaxPlotPx = 2400;
constexpr double kDigitPx = 6.6;  // rough advance of an 11px bold digit
constexpr double kTickPx = 90;
constexpr double kMemoryTitle = 22;  // "memory (MiB)" above the memory lanes
constexpr double kMemoryRow = 34;    // a rank's memory lane
constexpr double kMemoryGap = 6;

// Coordinates with at most two decimals, without trailing zeros.
std::string num(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string text = buffer;
  while (text.back() == '0') text.pop_back();
  if (text.back() == '.') text.pop_back();
  return text == "-0" ? "0" : text;
}

std::string escape_xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// 1, 2 or 5 times a power of ten, so that ticks fall about every
// kTickPx pixels along the axis.
double tick_step(double span, double plot_px) {
  const double raw = span * kTickPx / plot_px;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (factor * power >= raw) return factor * power;
  }
  return 10 * power;
}

// Sets the scale: the shortest compute event gets kShortestBoxPx, within
// bounds. Communication is left out: a short receive should not stretch it.
double shortest_compute(const Timeline& timeline) {
  double shortest = std::numeric_limits<double>::infinity();
  for (const Event& e : timeline.events) {
    if (schedule::is_compute(e.kind) && e.end > e.start)
      shortest = std::min(shortest, e.end - e.start);
  }
  return shortest;
}

std::string legend_name(ActionKind kind) {
  return std::string(schedule::to_string(kind)) + " " + detail::svg_style(kind).meaning;
}

// A swatch, its name in 12px text, and a gap before the next entry.
double legend_entry_width(const std::string& name) {
  return 20 + name.size() * 6.8 + 22;
}

double legend_width(const std::set<ActionKind>& kinds) {
  double width = 0;
  for (ActionKind kind : kinds) width += legend_entry_width(legend_name(kind));
  return width;
}

struct Layout {
  double span = 1;  // time the plot covers
  double plot_px = kMinPlotPx;
  bool with_stage = false;

  double x(double time) const { return kLeft + time * plot_px / span; }
  double y(int rank) const { return kTop + rank * (kRowHeight + kRowGap); }
};

void write_lanes_and_axis(std::ostream& out, const Timeline& timeline, const Layout& at) {
  for (int r = 0; r < timeline.ranks; ++r) {
    out << "<rect class=\"lane\" x=\"" << num(kLeft) << "\" y=\"" << num(at.y(r)) << "\" width=\""
        << num(at.plot_px) << "\" height=\"" << num(kRowHeight) << "\" fill=\"#f2f2f2\"/>\n";
    out << "<text x=\"" << num(kLeft - 10) << "\" y=\"" << num(at.y(r) + kRowHeight / 2 + 4)
        << "\" font-size=\"12\" text-anchor=\"end\" fill=\"#333333\">rank " << r << "</text>\n";
  }
  const double step = tick_step(at.span, at.plot_px);
  const double axis_y = at.y(timeline.ranks);
  out << "<g class=\"axis\" font-size=\"11\" fill=\"#444444\" text-anchor=\"middle\">\n";
  for (long i = 0; i * step <= at.span * (1 + 1e-9); ++i) {
    char label[32];
    std::snprintf(label, sizeof label, "%g", i * step);
    const std::string x = num(at.x(i * step));
    out << "<line x1=\"" << x << "\" y1=\"" << num(kTop - 4) << "\" x2=\"" << x << "\" y2=\""
        << num(axis_y + 4) << "\" stroke=\"#d0d0d0\" stroke-width=\"1\"/>\n";
    out << "<text class=\"tick\" x=\"" << x << "\" y=\"" << num(axis_y + 17) << "\">" << label
        << "</text>\n";
  }
  out << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(axis_y) << "\" x2=\""
      << num(at.x(at.span)) << "\" y2=\"" << num(axis_y) << "\" stroke=\"#666666\"/>\n";
  const std::string unit = timeline.time_unit.empty() ? "cost-model units" : timeline.time_unit;
  out << "<text x=\"" << num(kLeft + at.plot_px / 2) << "\" y=\"" << num(axis_y + 34) << "\">time ("
      << escape_xml(unit) << ")</text>\n</g>\n";
}

// A compute event fills its lane's height, with its micro-batch number (and
// stage) where they fit; communication is a thin strip along the lane's
// bottom and a gradient reduction one along its top, so neither hides the
// compute it overlaps.
void write_event(std::ostream& out, const Event& e, const Layout& at) {
  const detail::KindStyle& style = detail::svg_style(e.kind);
  const bool compute = schedule::is_compute(e.kind);
  const double x = at.x(e.start);
  const double w = at.x(e.end) - x;
  const bool reduction = schedule::is_step_action(e.kind);
  const double h = compute ? kRowHeight : reduction ? kRowHeight / 4 : kRowHeight / 5;
  const double y = reduction ? at.y(e.rank) : at.y(e.rank) + kRowHeight - h;
  out << "<rect class=\"event\" x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\"" << num(w)
      << "\" height=\"" << num(h) << "\" fill=\"" << style.fill
      << "\" stroke=\"#ffffff\" stroke-width=\"" << (compute ? 1 : 0.5) << "\"><title>rank "
      << e.rank << ": " << detail::event_label(e, true) << " from " << e.start << " to " << e.end
      << "</title></rect>\n";
  const std::string number = std::to_string(e.microbatch);
  if (!compute || w < number.size() * kDigitPx + 2) return;
  const std::string stage = "s" + std::to_string(e.stage);
  const bool show_stage = at.with_stage && w >= stage.size() * 5 + 2;
  out << "<text x=\"" << num(x + w / 2) << "\" y=\"" << num(y + (show_stage ? 14 : 19))
      << "\" font-size=\"11\" font-weight=\"bold\" text-anchor=\"middle\" fill=\"" << style.text
      << "\">" << number << "</text>\n";
  if (show_stage) {
    out << "<text x=\"" << num(x + w / 2) << "\" y=\"" << num(y + 25)
        << "\" font-size=\"8\" text-anchor=\"middle\" fill=\"" << style.text << "\">" << stage
        << "</text>\n";
  }
}

// Height of the memory lanes (none without memory points).
double memory_height(const Timeline& timeline) {
  return timeline.memory.empty() ? 0 : kMemoryTitle + timeline.ranks * (kMemoryRow + kMemoryGap);
}

// Under the axis from `top`: a lane per rank, its bytes over time as a
// filled step (each point held until the rank's next, the last until the
// end), all ranks on the scale of the highest point, each lane's peak named.
void write_memory(std::ostream& out, const Timeline& timeline, const Layout& at, double top) {
  double highest = 0;
  for (const MemoryPoint& m : timeline.memory) highest = std::max(highest, m.bytes);
  const double scale = highest > 0 ? (kMemoryRow - 4) / highest : 0;
  constexpr double kMiB = 1024.0 * 1024.0;
  char text[64];
  std::snprintf(text, sizeof text, "memory (the lanes' scale: %.2f MiB)", highest / kMiB);
  out << "<text class=\"memory-title\" x=\"" << num(kLeft) << "\" y=\"" << num(top + 15)
      << "\" font-size=\"12\" fill=\"#333333\">" << text << "</text>\n";
  for (int r = 0; r < timeline.ranks; ++r) {
    std::vector<MemoryPoint> points;
    for (const MemoryPoint& m : timeline.memory)
      if (m.rank == r) points.push_back(m);
    std::stable_sort(points.begin(), points.end(),
                     [](const MemoryPoint& a, const MemoryPoint& b) { return a.time < b.time; });
    const double y0 = top + kMemoryTitle + r * (kMemoryRow + kMemoryGap);
    const double bottom = y0 + kMemoryRow;
    out << "<rect class=\"memory-lane\" x=\"" << num(kLeft) << "\" y=\"" << num(y0) << "\" width=\""
        << num(at.plot_px) << "\" height=\"" << num(kMemoryRow) << "\" fill=\"#f7f7f7\"/>\n";
    out << "<text x=\"" << num(kLeft - 10) << "\" y=\"" << num(y0 + kMemoryRow / 2 + 4)
        << "\" font-size=\"12\" text-anchor=\"end\" fill=\"#333333\">rank " << r << "</text>\n";
    if (points.empty()) continue;
    double peak = 0;
    std::string path = "M" + num(at.x(std::min(points.front().time, at.span))) + " " + num(bottom);
    for (size_t i = 0; i < points.size(); ++i) {
      const double from = std::min(points[i].time, at.span);
      const double until = i + 1 < points.size() ? std::min(points[i + 1].time, at.span) : at.span;
      const std::string y = num(bottom - points[i].bytes * scale);
      path += " L" + num(at.x(from)) + " " + y + " L" + num(at.x(until)) + " " + y;
      peak = std::max(peak, points[i].bytes);
    }
    path += " L" + num(at.x(at.span)) + " " + num(bottom) + " Z";
    std::snprintf(text, sizeof text, "peak %.2f MiB", peak / kMiB);
    out << "<path class=\"memory\" d=\"" << path
        << "\" fill=\"#9ecae1\" stroke=\"#3182bd\" stroke-width=\"1\"><title>rank " << r << ": "
        << text << "</title></path>\n";
    out << "<text x=\"" << num(kLeft + at.plot_px - 4) << "\" y=\"" << num(y0 + 12)
        << "\" font-size=\"11\" text-anchor=\"end\" fill=\"#333333\">" << text << "</text>\n";
  }
}

void write_legend(std::ostream& out, const std::set<ActionKind>& kinds, double y) {
  double x = kLeft;
  for (ActionKind kind : kinds) {
    const std::string name = legend_name(kind);
    out << "<rect class=\"legend\" x=\"" << num(x) << "\" y=\"" << num(y)
        << "\" width=\"14\" height=\"14\" fill=\"" << detail::svg_style(kind).fill << "\"/>\n";
    out << "<text x=\"" << num(x + 20) << "\" y=\"" << num(y + 11)
        << "\" font-size=\"12\" fill=\"#333333\">" << escape_xml(name) << "</text>\n";
    x += legend_entry_width(name);
  }
}

}  // namespace

std::string to_svg(const Timeline& timeline) {
  detail::check_events(timeline, "trace.to_svg");
  Layout at;
  at.span = makespan(timeline) > 0 ? makespan(timeline) : 1;
  at.plot_px = std::clamp(at.span / std::min(at.span, shortest_compute(timeline)) * kShortestBoxPx,
                          kMinPlotPx, kMaxPlotPx);
  at.with_stage = detail::several_stages_per_rank(timeline);
  std::set<ActionKind> kinds;
  for (const Event& e : timeline.events) kinds.insert(e.kind);
  const double width = kLeft + std::max(at.plot_px, legend_width(kinds)) + kRight;
  const double height =
      at.y(timeline.ranks) + kAxisHeight + memory_height(timeline) + kLegendHeight;

  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(width) << "\" height=\""
      << num(height) << "\" viewBox=\"0 0 " << num(width) << " " << num(height)
      << "\" font-family=\"Helvetica, Arial, sans-serif\">\n";
  out << "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  char percent[32];
  std::snprintf(percent, sizeof percent, "%.1f%%", 100 * bubble_fraction(timeline));
  const std::string title = timeline.title.empty() ? "timeline" : timeline.title;
  out << "<text class=\"title\" x=\"" << num(kLeft) << "\" y=\"28\" font-size=\"16\" "
      << "font-weight=\"bold\" fill=\"#222222\">" << escape_xml(title) << " \u2014 bubble "
      << percent << "</text>\n";
  write_lanes_and_axis(out, timeline, at);
  for (const Event& e : timeline.events)
    if (schedule::is_compute(e.kind)) write_event(out, e, at);
  for (const Event& e : timeline.events)
    if (!schedule::is_compute(e.kind)) write_event(out, e, at);
  if (!timeline.memory.empty()) write_memory(out, timeline, at, at.y(timeline.ranks) + kAxisHeight);
  write_legend(out, kinds, at.y(timeline.ranks) + kAxisHeight + memory_height(timeline) + 6);
  out << "</svg>\n";
  return out.str();
}

}  // namespace baton::trace
