// Temporary: replaced by grid_writer.cpp, svg_writer.cpp, chrome_trace_writer.cpp.
#include <fstream>

#include "baton/core/error.h"
#include "baton/trace/writers.h"

namespace baton::trace {
std::string to_grid(const Timeline&) { return "(grid not built yet)\n"; }
std::string to_svg(const Timeline&) { return "<svg xmlns=\"http://www.w3.org/2000/svg\"/>\n"; }
std::string to_chrome_trace(const Timeline&) { return "{}\n"; }
void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  BATON_CHECK(out.good(), "[trace.write] cannot write \"", path, "\"");
  out << text;
}
}  // namespace baton::trace
