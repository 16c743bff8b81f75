#include <cmath>
#include <cstdlib>

#include "baton/core/printable.h"
#include "tools/cli.h"

namespace baton::cli {

CLI::Validator finite_number(bool positive, const std::string& type) {
  return CLI::Validator(
      [positive](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        const bool ok =
            end != text.c_str() && *end == '\0' && std::isfinite(x) && (positive ? x > 0 : x >= 0);
        if (ok) return "";
        return std::string("must be a finite number ") + (positive ? "> 0" : ">= 0") + ", got " +
               printable(text);
      },
      type, positive ? "positive" : "non-negative");
}

CLI::Validator fraction() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        const bool ok = end != text.c_str() && *end == '\0' && std::isfinite(x) && x > 0 && x <= 1;
        if (ok) return "";
        return "must be a number in (0, 1], got " + printable(text);
      },
      "FRACTION", "fraction");
}

}  // namespace baton::cli
