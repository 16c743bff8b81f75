#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "baton/core/error.h"
#include "baton/partition/balance.h"
#include "baton/partition/min_max.h"
#include "baton/partition/stage_load.h"

namespace baton::partition {
namespace {

std::string format_bytes(double bytes) {
  std::ostringstream out;
  out << std::setprecision(15) << bytes << " bytes";
  return out.str();
}

}  // namespace

Partition optimal(const std::vector<LayerCost>& costs, int stages, const BalanceOptions& options) {
  detail::check_problem(costs, stages, options);
  const int layers = static_cast<int>(costs.size());
  const double cap = options.memory_cap_bytes;
  const detail::LoadTable table(costs, stages, options);
  std::vector<int> counts =
      detail::min_max_partition(layers, stages, [&](int s, int first, int end) {
        if (cap > 0 && table.memory_bytes(s, first, end) > cap) {
          return std::numeric_limits<double>::infinity();
        }
        return table.time(s, first, end);
      });
  if (counts.empty()) {
    // The smallest feasible cap is itself a min-max partition, of memory.
    const std::vector<int> leanest = detail::min_max_partition(
        layers, stages,
        [&](int s, int first, int end) { return table.memory_bytes(s, first, end); });
    double needed = 0;
    int first = 0;
    for (int s = 0; s < stages; ++s) {
      needed = std::max(needed, table.memory_bytes(s, first, first + leanest[s]));
      first += leanest[s];
    }
    BATON_CHECK(false, "[partition.optimal] no partition of ", layers, " layers into ", stages,
                " stages fits the memory cap of ", format_bytes(cap),
                " per stage; the smallest feasible cap is ", format_bytes(std::ceil(needed)),
                " (partition ", Partition(leanest), ")");
  }
  return Partition(std::move(counts));
}

}  // namespace baton::partition
