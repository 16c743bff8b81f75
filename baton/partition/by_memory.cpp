#include "baton/partition/balance.h"
#include "baton/partition/min_max.h"
#include "baton/partition/stage_load.h"

namespace baton::partition {

Partition by_memory(const std::vector<LayerCost>& costs, int stages,
                    const BalanceOptions& options) {
  detail::check_problem(costs, stages, options);
  // In-flight factors differ by stage, so a stage's memory is not a plain sum
  // of per-layer weights; min_max_partition takes the stage into account.
  const detail::LoadTable table(costs, stages, options);
  return Partition(detail::min_max_partition(
      static_cast<int>(costs.size()), stages,
      [&](int s, int first, int end) { return table.memory_bytes(s, first, end); }));
}

}  // namespace baton::partition
