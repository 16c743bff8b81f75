#include "baton/partition/stage_load.h"

#include "baton/core/error.h"

namespace baton::partition {
namespace detail {

LoadTable::LoadTable(const std::vector<LayerCost>& costs, int stages, const BalanceOptions& options)
    : stages_(stages),
      comm_latency_(options.comm_latency),
      comm_bytes_per_time_(options.comm_bytes_per_time),
      in_flight_(options.activations_in_flight) {
  if (in_flight_.empty()) in_flight_.assign(stages, 1.0);
  const size_t L = costs.size();
  output_bytes_.resize(L);
  time_.assign(L + 1, 0.0);
  parameter_bytes_.assign(L + 1, 0.0);
  activation_bytes_.assign(L + 1, 0.0);
  for (size_t i = 0; i < L; ++i) {
    time_[i + 1] = time_[i] + costs[i].forward_time + costs[i].backward_time;
    parameter_bytes_[i + 1] = parameter_bytes_[i] + costs[i].parameter_bytes;
    activation_bytes_[i + 1] = activation_bytes_[i] + costs[i].activation_bytes;
    output_bytes_[i] = costs[i].output_bytes;
  }
}

double LoadTable::comm_time(int stage, int end) const {
  if (stage == stages_ - 1) return 0;
  double one_way = comm_latency_;
  if (comm_bytes_per_time_ > 0) one_way += output_bytes_[end - 1] / comm_bytes_per_time_;
  return 2 * one_way;  // the activation forward, its gradient back
}

double LoadTable::memory_bytes(int stage, int first, int end) const {
  return (parameter_bytes_[end] - parameter_bytes_[first]) +
         in_flight_[stage] * (activation_bytes_[end] - activation_bytes_[first]);
}

}  // namespace detail

std::vector<StageLoad> stage_loads(const Partition& partition, const std::vector<LayerCost>& costs,
                                   const BalanceOptions& options) {
  BATON_CHECK(partition.layers() == static_cast<int>(costs.size()), "[partition.stage_loads] ",
              "partition ", partition, " covers ", partition.layers(), " layers but ", costs.size(),
              " layer costs were given");
  detail::check_problem(costs, partition.stages(), options);
  const detail::LoadTable table(costs, partition.stages(), options);
  std::vector<StageLoad> loads;
  for (int s = 0; s < partition.stages(); ++s) {
    const int first = partition.first_layer(s);
    const int end = partition.end_layer(s);
    loads.push_back({table.compute_time(first, end), table.comm_time(s, end),
                     table.memory_bytes(s, first, end)});
  }
  return loads;
}

}  // namespace baton::partition
