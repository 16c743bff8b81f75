// The shared engine of the balancing methods: the contiguous partition that
// minimises its largest stage cost, for any cost of (stage, layer range).
#pragma once

#include <functional>
#include <vector>

namespace baton::partition::detail {

// cost(stage, first, end): the cost of stage `stage` holding layers
// [first, end); +infinity forbids it. Must be >= 0 and deterministic.
using StageCostFn = std::function<double(int stage, int first, int end)>;

// Layer counts of the partition of `layers` into `stages` non-empty stages
// that minimises the largest stage cost. Ties go to the smallest sum of
// squared stage costs, then to the smallest sum of squared layer counts, then
// to the lexicographically largest counts; costs within a relative 1e-9 of
// each other count as equal. Empty when every partition has a forbidden stage.
// REQUIRES: 1 <= stages <= layers.
std::vector<int> min_max_partition(int layers, int stages, const StageCostFn& cost);

// The classic linear partition: the stage cost is the sum of its layers' weights.
std::vector<int> linear_partition(const std::vector<double>& weights, int stages);

}  // namespace baton::partition::detail
