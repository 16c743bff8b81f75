#include "baton/plan/plot.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace baton::plan {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

// A round step giving about 5 ticks over [0, top].
double tick_step(double top) {
  const double raw = top / 5, unit = std::pow(10, std::floor(std::log10(raw)));
  for (double k : {1.0, 2.0, 5.0, 10.0})
    if (k * unit >= raw) return k * unit;
  return 10 * unit;
}

}  // namespace

std::string plot_svg(const PlanResult& result, double limit_gb, const std::string& title) {
  const double width = 800, height = 500, left = 70, right = 20, top = 40, bottom = 50;
  double max_x = limit_gb, max_y = 0;
  for (const auto* list : {&result.estimates, &result.plans}) {
    for (const Plan& p : *list) {
      max_x = std::max(max_x, p.memory_bytes / 1e9);
      max_y = std::max(max_y, p.sequences_per_s);
    }
  }
  max_x = std::min(max_x, 4 * limit_gb) * 1.05;  // far outliers sit on the right edge
  max_y = max_y > 0 ? max_y * 1.05 : 1;
  auto x = [&](double gb) { return left + std::min(gb, max_x) / max_x * (width - left - right); };
  auto y = [&](double v) { return height - bottom - v / max_y * (height - top - bottom); };

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"22\" font-size=\"15\">" << escape(title) << "</text>\n";
  const double sx = tick_step(max_x), sy = tick_step(max_y);
  for (double g = 0; g <= max_x; g += sx) {
    svg << "<line x1=\"" << x(g) << "\" y1=\"" << top << "\" x2=\"" << x(g) << "\" y2=\""
        << height - bottom << "\" stroke=\"#eee\"/><text x=\"" << x(g) << "\" y=\""
        << height - bottom + 16 << "\" text-anchor=\"middle\">" << g << "</text>\n";
  }
  for (double v = 0; v <= max_y; v += sy) {
    svg << "<line x1=\"" << left << "\" y1=\"" << y(v) << "\" x2=\"" << width - right << "\" y2=\""
        << y(v) << "\" stroke=\"#eee\"/><text x=\"" << left - 6 << "\" y=\"" << y(v) + 4
        << "\" text-anchor=\"end\">" << v << "</text>\n";
  }
  svg << "<text x=\"" << (left + width - right) / 2 << "\" y=\"" << height - 12
      << "\" text-anchor=\"middle\">memory per GPU (GB)</text>\n"
      << "<text transform=\"translate(16," << (top + height - bottom) / 2
      << ") rotate(-90)\" text-anchor=\"middle\">predicted throughput (sequences/s)</text>\n";
  svg << "<line x1=\"" << x(limit_gb) << "\" y1=\"" << top << "\" x2=\"" << x(limit_gb)
      << "\" y2=\"" << height - bottom << "\" stroke=\"black\" stroke-dasharray=\"6 4\"/>"
      << "<text x=\"" << x(limit_gb) + 4 << "\" y=\"" << top + 12 << "\">limit " << limit_gb
      << " GB</text>\n";
  auto dot = [&](const Plan& p, const char* color, double r) {
    svg << "<circle cx=\"" << x(p.memory_bytes / 1e9) << "\" cy=\"" << y(p.sequences_per_s)
        << "\" r=\"" << r << "\" fill=\"" << color << "\" fill-opacity=\"0.6\"/>\n";
  };
  for (const Plan& p : result.estimates) dot(p, "#999", 2);
  for (const Plan& p : result.plans) dot(p, "#1f77b4", 3.5);
  if (!result.plans.empty()) {
    const Plan& c = result.plans.front();
    dot(c, "#d62728", 6);
    svg << "<text x=\"" << x(c.memory_bytes / 1e9) + 8 << "\" y=\"" << y(c.sequences_per_s) - 8
        << "\" fill=\"#d62728\">chosen: t=" << c.config.t << " p=" << c.config.p
        << " d=" << c.config.d << " b=" << c.config.microbatch << " " << escape(c.config.schedule)
        << "</text>\n";
  }
  svg << "<text x=\"" << width - right << "\" y=\"" << top - 8 << "\" text-anchor=\"end\">"
      << "grey: bounds (not simulated), blue: simulated, red: chosen</text>\n</svg>\n";
  return svg.str();
}

}  // namespace baton::plan
