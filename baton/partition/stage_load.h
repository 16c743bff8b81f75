// What a stage of a partition costs under the model optimal() minimises, so
// that callers (the planner, the CLI) can report or check any partition.
#pragma once

#include <vector>

#include "baton/partition/balance.h"
#include "baton/partition/partition.h"

namespace baton::partition {

struct StageLoad {
  double compute_time = 0;  // forward + backward time of its layers, one micro-batch
  // Moving its boundary: the activation forward and its gradient back over the
  // same link, so 2 x (comm_latency + output_bytes of its last layer /
  // comm_bytes_per_time). The stage ending a boundary is charged both
  // transfers; the last stage sends nothing.
  double comm_time = 0;
  double memory_bytes = 0;  // parameter bytes + in-flight factor x activation bytes

  double time() const { return compute_time + comm_time; }
};

// One StageLoad per stage of `partition`.
// REQUIRES: partition.layers() == costs.size(); options as for optimal().
std::vector<StageLoad> stage_loads(const Partition& partition, const std::vector<LayerCost>& costs,
                                   const BalanceOptions& options = {});

namespace detail {

// Stage loads of any layer range in O(1), from prefix sums over the layers.
class LoadTable {
 public:
  LoadTable(const std::vector<LayerCost>& costs, int stages, const BalanceOptions& options);

  // Layers [first, end) as stage `stage` of `stages_`.
  double compute_time(int first, int end) const { return time_[end] - time_[first]; }
  double comm_time(int stage, int end) const;
  double memory_bytes(int stage, int first, int end) const;
  double time(int stage, int first, int end) const {
    return compute_time(first, end) + comm_time(stage, end);
  }

 private:
  int stages_;
  double comm_latency_;
  double comm_bytes_per_time_;
  std::vector<double> in_flight_;                                  // one a stage
  std::vector<double> output_bytes_;                               // one a layer
  std::vector<double> time_, parameter_bytes_, activation_bytes_;  // prefix sums
};

}  // namespace detail
}  // namespace baton::partition
