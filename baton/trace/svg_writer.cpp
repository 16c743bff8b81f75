#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>

#include "baton/trace/event_label.h"
#include "baton/trace/svg_palette.h"
#include "baton/trace/writers.h"

namespace baton::trace {
namespace {

using schedule::ActionKind;

constexpr double kLeft = 72;         // room for "rank 12"
constexpr double kRight = 28;
constexpr double kTop = 48;          // the title
constexpr double kRowHeight = 30;
constexpr double kRowGap = 6;
constexpr double kAxisHeight = 42;   // ticks, their labels, the axis name
constexpr double kLegendHeight = 34;
constexpr double kShortestBoxPx = 26;  // wide enough for "31" in 11px bold
constexpr double kMinPlotPx = 480;
constexpr double kMaxPlotPx = 2400;
constexpr double kDigitPx = 6.6;     // rough advance of an 11px bold digit

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
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// 1, 2 or 5 times a power of ten, so that about ten ticks span `span`.
double tick_step(double span) {
  const double raw = span / 10;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0}) {
    if (factor * power >= raw) return factor * power;
  }
  return 10 * power;
}

double shortest_duration(const Timeline& timeline) {
  double shortest = std::numeric_limits<double>::infinity();
  for (const Event& e : timeline.events) {
    if (e.end > e.start) shortest = std::min(shortest, e.end - e.start);
  }
  return shortest;
}

std::string legend_name(ActionKind kind) {
  return std::string(schedule::to_string(kind)) + " " + detail::svg_style(kind).meaning;
}

// A swatch, its name in 12px text, and a gap before the next entry.
double legend_entry_width(const std::string& name) { return 20 + name.size() * 6.8 + 22; }

double legend_width(const std::set<ActionKind>& kinds) {
  double width = 0;
  for (ActionKind kind : kinds) width += legend_entry_width(legend_name(kind));
  return width;
}

}  // namespace

std::string to_svg(const Timeline& timeline) {
  detail::check_events(timeline, "trace.to_svg");
  const bool with_stage = detail::several_stages_per_rank(timeline);
  const double span = makespan(timeline) > 0 ? makespan(timeline) : 1;
  const double shortest = std::min(span, shortest_duration(timeline));
  const double plot_px = std::clamp(span / shortest * kShortestBoxPx, kMinPlotPx, kMaxPlotPx);
  const double px_per_unit = plot_px / span;
  const double rows_px = timeline.ranks * (kRowHeight + kRowGap);
  std::set<ActionKind> kinds;
  for (const Event& e : timeline.events) kinds.insert(e.kind);
  const double width = std::max(kLeft + plot_px + kRight, kLeft + legend_width(kinds) + kRight);
  const double height = kTop + rows_px + kAxisHeight + kLegendHeight;
  auto x_of = [&](double time) { return kLeft + time * px_per_unit; };
  auto y_of = [&](int rank) { return kTop + rank * (kRowHeight + kRowGap); };

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

  // Lanes and tick lines first, so the boxes draw over them.
  for (int r = 0; r < timeline.ranks; ++r) {
    out << "<rect class=\"lane\" x=\"" << num(kLeft) << "\" y=\"" << num(y_of(r)) << "\" width=\""
        << num(plot_px) << "\" height=\"" << num(kRowHeight) << "\" fill=\"#f2f2f2\"/>\n";
    out << "<text x=\"" << num(kLeft - 10) << "\" y=\"" << num(y_of(r) + kRowHeight / 2 + 4)
        << "\" font-size=\"12\" text-anchor=\"end\" fill=\"#333333\">rank " << r << "</text>\n";
  }
  const double step = tick_step(span);
  const double axis_y = kTop + rows_px;
  out << "<g class=\"axis\" font-size=\"11\" fill=\"#444444\" text-anchor=\"middle\">\n";
  for (long i = 0; i * step <= span * (1 + 1e-9); ++i) {
    const double x = x_of(i * step);
    char label[32];
    std::snprintf(label, sizeof label, "%g", i * step);
    out << "<line x1=\"" << num(x) << "\" y1=\"" << num(kTop - 4) << "\" x2=\"" << num(x)
        << "\" y2=\"" << num(axis_y + 4) << "\" stroke=\"#d0d0d0\" stroke-width=\"1\"/>\n";
    out << "<text x=\"" << num(x) << "\" y=\"" << num(axis_y + 17) << "\">" << label
        << "</text>\n";
  }
  out << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(axis_y) << "\" x2=\""
      << num(kLeft + plot_px) << "\" y2=\"" << num(axis_y) << "\" stroke=\"#666666\"/>\n";
  const std::string unit = timeline.time_unit.empty() ? "cost-model units" : timeline.time_unit;
  out << "<text x=\"" << num(kLeft + plot_px / 2) << "\" y=\"" << num(axis_y + 34)
      << "\">time (" << escape_xml(unit) << ")</text>\n</g>\n";

  for (const Event& e : timeline.events) {
    const detail::KindStyle& style = detail::svg_style(e.kind);
    const double x = x_of(e.start);
    const double w = (e.end - e.start) * px_per_unit;
    const double y = y_of(e.rank);
    out << "<rect class=\"event\" x=\"" << num(x) << "\" y=\"" << num(y) << "\" width=\""
        << num(w) << "\" height=\"" << num(kRowHeight) << "\" fill=\"" << style.fill
        << "\" stroke=\"#ffffff\" stroke-width=\"1\"><title>rank " << e.rank << ": "
        << detail::event_label(e, true) << " from " << e.start << " to " << e.end
        << "</title></rect>\n";
    const std::string number = std::to_string(e.microbatch);
    if (w < number.size() * kDigitPx + 2) continue;
    const std::string stage = "s" + std::to_string(e.stage);
    const bool show_stage = with_stage && w >= stage.size() * 5 + 2;
    out << "<text x=\"" << num(x + w / 2) << "\" y=\"" << num(y + (show_stage ? 14 : 19))
        << "\" font-size=\"11\" font-weight=\"bold\" text-anchor=\"middle\" fill=\""
        << style.text << "\">" << number << "</text>\n";
    if (show_stage) {
      out << "<text x=\"" << num(x + w / 2) << "\" y=\"" << num(y + 25)
          << "\" font-size=\"8\" text-anchor=\"middle\" fill=\"" << style.text << "\">" << stage
          << "</text>\n";
    }
  }

  double legend_x = kLeft;
  const double legend_y = axis_y + kAxisHeight + 6;
  for (ActionKind kind : kinds) {
    const detail::KindStyle& style = detail::svg_style(kind);
    const std::string name = legend_name(kind);
    out << "<rect class=\"legend\" x=\"" << num(legend_x) << "\" y=\"" << num(legend_y)
        << "\" width=\"14\" height=\"14\" fill=\"" << style.fill << "\"/>\n";
    out << "<text x=\"" << num(legend_x + 20) << "\" y=\"" << num(legend_y + 11)
        << "\" font-size=\"12\" fill=\"#333333\">" << escape_xml(name) << "</text>\n";
    legend_x += legend_entry_width(name);
  }
  out << "</svg>\n";
  return out.str();
}

}  // namespace baton::trace
