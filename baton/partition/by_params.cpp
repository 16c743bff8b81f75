#include "baton/partition/balance.h"
#include "baton/partition/min_max.h"

namespace baton::partition {

Partition by_params(const std::vector<LayerCost>& costs, int stages) {
  detail::check_problem(costs, stages);
  std::vector<double> weights;
  weights.reserve(costs.size());
  for (const LayerCost& c : costs) weights.push_back(c.parameter_bytes);
  return Partition(detail::linear_partition(weights, stages));
}

}  // namespace baton::partition
