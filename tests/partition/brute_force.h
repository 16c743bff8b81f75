// Test oracle for the balancing methods: enumerate every partition of L layers
// into S non-empty contiguous stages and score each from first principles,
// sharing no code with the library. Also the small helpers the partition
// tests share: error_of() and the (layers, stages) shapes they sweep.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "baton/core/error.h"
#include "baton/partition/partition.h"

namespace baton::partition::testing {

// The message of the baton::Error that `f` throws; fails the test if none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected baton::Error";
  return "";
}

// Every (layers, stages) with 1 <= stages <= min(layers, 5), layers 1..12:
// small enough to enumerate every partition.
inline std::vector<std::tuple<int, int>> sweep_shapes() {
  std::vector<std::tuple<int, int>> shapes;
  for (int layers = 1; layers <= 12; ++layers) {
    for (int stages = 1; stages <= std::min(layers, 5); ++stages)
      shapes.emplace_back(layers, stages);
  }
  return shapes;
}

// "L7_S3", a test-name suffix for a sweep_shapes() entry.
template <typename Info>
std::string shape_name(const Info& info) {
  return "L" + std::to_string(std::get<0>(info.param)) + "_S" +
         std::to_string(std::get<1>(info.param));
}

// Every composition of `layers` into `stages` positive parts, in lexicographic order.
inline std::vector<std::vector<int>> all_partitions(int layers, int stages) {
  std::vector<std::vector<int>> out;
  std::vector<int> counts;
  std::function<void(int)> extend = [&](int left) {
    const int to_place = stages - static_cast<int>(counts.size());
    if (to_place == 1) {
      counts.push_back(left);
      out.push_back(counts);
      counts.pop_back();
      return;
    }
    for (int n = 1; n <= left - (to_place - 1); ++n) {
      counts.push_back(n);
      extend(left - n);
      counts.pop_back();
    }
  };
  extend(layers);
  return out;
}

// A stage's score from its index and its layers [first, end).
using StageScore = std::function<double(int stage, int first, int end)>;

struct Best {
  double bottleneck;        // smallest largest stage score; infinity if none is allowed
  std::vector<int> counts;  // the library's tie rule: then least sum of squared scores,
                            // least sum of squared counts, lexicographically largest counts
                            // (exact comparisons)
};

// Scores of +infinity forbid a stage.
inline Best brute_force(int layers, int stages, const StageScore& score) {
  Best best{std::numeric_limits<double>::infinity(), {}};
  double best_squares = std::numeric_limits<double>::infinity();
  long long best_count_squares = 0;
  for (const auto& counts : all_partitions(layers, stages)) {
    double worst = 0;
    double squares = 0;
    long long count_squares = 0;
    int first = 0;
    for (int s = 0; s < stages; ++s) {
      const double v = score(s, first, first + counts[s]);
      worst = std::max(worst, v);
      squares += v * v;
      count_squares += static_cast<long long>(counts[s]) * counts[s];
      first += counts[s];
    }
    if (worst == std::numeric_limits<double>::infinity()) continue;
    const auto key = std::make_tuple(worst, squares, count_squares);
    const auto best_key = std::make_tuple(best.bottleneck, best_squares, best_count_squares);
    if (key < best_key || (key == best_key && counts > best.counts)) {
      best = {worst, counts};
      best_squares = squares;
      best_count_squares = count_squares;
    }
  }
  return best;
}

// The largest stage score of one partition.
inline double bottleneck_of(const Partition& partition, const StageScore& score) {
  double worst = 0;
  for (int s = 0; s < partition.stages(); ++s) {
    worst = std::max(worst, score(s, partition.first_layer(s), partition.end_layer(s)));
  }
  return worst;
}

// Random layer costs. Integer-valued ones make every float sum exact, so that
// ties are real ties and the tie rule can be checked exactly.
inline std::vector<LayerCost> random_costs(std::mt19937& rng, int layers, bool integers) {
  std::uniform_real_distribution<double> real(0.0, 10.0);
  std::uniform_int_distribution<int> small(0, 6);
  const auto draw = [&] { return integers ? static_cast<double>(small(rng)) : real(rng); };
  std::vector<LayerCost> costs(layers);
  for (auto& c : costs) {
    c.forward_time = draw();
    c.backward_time = draw();
    c.parameter_bytes = draw();
    c.activation_bytes = draw();
    c.output_bytes = draw();
  }
  return costs;
}

}  // namespace baton::partition::testing
