#include "baton/partition/min_max.h"

#include <cmath>
#include <limits>

#include "baton/core/error.h"

namespace baton::partition::detail {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Loads within this relative distance count as equal, so that float rounding
// (0.1 + 0.2 vs 0.3) does not decide between two equally good partitions.
constexpr double kTolerance = 1e-9;

double slack(double value) {
  return value + kTolerance * std::abs(value);
}

// table[s][i] for stage s starting at layer i, flattened.
class Table {
 public:
  Table(int stages, int layers) : width_(layers + 1), cells_(size_t(stages) * width_, kInf) {}
  double& at(int stage, int first) { return cells_[size_t(stage) * width_ + first]; }

 private:
  size_t width_;
  std::vector<double> cells_;
};

}  // namespace

std::vector<int> min_max_partition(int layers, int stages, const StageCostFn& cost) {
  BATON_ASSERT(stages >= 1 && stages <= layers, "min_max_partition(", layers, ", ", stages, ")");
  const int S = stages;
  const int L = layers;
  // Stage s may start at layer i when the stages before it and after it can each get a layer.
  const auto last_end = [&](int s) { return L - (S - 1 - s); };

  // Pass 1: bottleneck[s][i] = smallest largest cost of stages s.. over layers i..
  Table bottleneck(S, L);
  for (int i = S - 1; i < L; ++i) bottleneck.at(S - 1, i) = cost(S - 1, i, L);
  for (int s = S - 2; s >= 0; --s) {
    for (int i = s; i < last_end(s); ++i) {
      double best = kInf;
      for (int end = i + 1; end <= last_end(s); ++end) {
        const double rest = bottleneck.at(s + 1, end);
        if (rest >= best) continue;
        const double here = cost(s, i, end);
        best = std::min(best, std::max(here, rest));
      }
      bottleneck.at(s, i) = best;
    }
  }
  const double limit = bottleneck.at(0, 0);
  if (!std::isfinite(limit)) return {};
  const double cap = slack(limit);

  // Pass 2: among partitions whose stages all cost at most `cap`, the smallest
  // sum of squared stage costs, then the smallest sum of squared layer counts.
  Table squares(S, L);
  Table count_squares(S, L);
  const auto square_cost = [&](int s, int i, int end) {
    const double c = cost(s, i, end);
    return c <= cap ? c * c : kInf;
  };
  const auto better = [](double sq, double nsq, double best_sq, double best_nsq) {
    if (sq != best_sq && !(sq <= slack(best_sq) && best_sq <= slack(sq))) return sq < best_sq;
    return nsq < best_nsq;
  };
  for (int i = S - 1; i < L; ++i) {
    squares.at(S - 1, i) = square_cost(S - 1, i, L);
    count_squares.at(S - 1, i) = double(L - i) * (L - i);
  }
  for (int s = S - 2; s >= 0; --s) {
    for (int i = s; i < last_end(s); ++i) {
      double best_sq = kInf;
      double best_nsq = kInf;
      for (int end = i + 1; end <= last_end(s); ++end) {
        const double rest = squares.at(s + 1, end);
        if (!std::isfinite(rest)) continue;
        const double sq = square_cost(s, i, end) + rest;
        const double nsq = double(end - i) * (end - i) + count_squares.at(s + 1, end);
        if (std::isfinite(sq) && better(sq, nsq, best_sq, best_nsq)) {
          best_sq = sq;
          best_nsq = nsq;
        }
      }
      squares.at(s, i) = best_sq;
      count_squares.at(s, i) = best_nsq;
    }
  }
  BATON_ASSERT(std::isfinite(squares.at(0, 0)), "pass 2 lost the pass-1 partition");

  // Front to back, each stage takes the most layers that keep the suffix as
  // good as pass 2 found it (the choice pass 2 made always qualifies).
  std::vector<int> counts;
  int first = 0;
  for (int s = 0; s + 1 < S; ++s) {
    const double target_sq = slack(squares.at(s, first));
    const double target_nsq = count_squares.at(s, first);
    int chosen = -1;
    for (int end = last_end(s); end > first; --end) {
      const double rest = squares.at(s + 1, end);
      if (!std::isfinite(rest)) continue;
      const double sq = square_cost(s, first, end) + rest;
      const double nsq = double(end - first) * (end - first) + count_squares.at(s + 1, end);
      if (sq <= target_sq && nsq <= target_nsq) {
        chosen = end;
        break;
      }
    }
    BATON_ASSERT(chosen > first, "no stage ", s, " choice reproduces the optimum");
    counts.push_back(chosen - first);
    first = chosen;
  }
  counts.push_back(L - first);
  return counts;
}

std::vector<int> linear_partition(const std::vector<double>& weights, int stages) {
  std::vector<double> prefix(weights.size() + 1, 0.0);
  for (size_t i = 0; i < weights.size(); ++i) prefix[i + 1] = prefix[i] + weights[i];
  return min_max_partition(static_cast<int>(weights.size()), stages,
                           [&](int, int first, int end) { return prefix[end] - prefix[first]; });
}

}  // namespace baton::partition::detail
