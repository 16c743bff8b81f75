#include "baton/partition/balance.h"

#include <cmath>

#include "baton/core/error.h"

namespace baton::partition {
namespace {

const char* plural(long long n) {
  return n == 1 ? "" : "s";
}

bool finite_non_negative(double x) {
  return std::isfinite(x) && x >= 0;
}

void check_cost(size_t layer, const char* field, double value) {
  BATON_CHECK(finite_non_negative(value), "[partition] layer ", layer, ": ", field, " is ", value,
              "; layer costs must be finite and non-negative");
}

// Hand-written counts, not a method name: "3,5,4", "12", "-1,4".
bool looks_like_counts(std::string_view method) {
  if (method.find(',') != std::string_view::npos) return true;
  const size_t start = method.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  const char c = method[start];
  return (c >= '0' && c <= '9') || c == '-' || c == '+';
}

}  // namespace

namespace detail {

void check_shape(int layers, int stages) {
  BATON_CHECK(stages >= 1, "[partition] the pipeline needs at least 1 stage, got ", stages);
  BATON_CHECK(stages <= layers, "[partition] ", stages, " stage", plural(stages),
              " but the model has only ", layers, " layer", plural(layers),
              "; every stage needs at least one layer");
}

void check_problem(const std::vector<LayerCost>& costs, int stages, const BalanceOptions& options) {
  check_shape(static_cast<int>(costs.size()), stages);
  for (size_t i = 0; i < costs.size(); ++i) {
    check_cost(i, "forward_time", costs[i].forward_time);
    check_cost(i, "backward_time", costs[i].backward_time);
    check_cost(i, "parameter_bytes", costs[i].parameter_bytes);
    check_cost(i, "activation_bytes", costs[i].activation_bytes);
    check_cost(i, "output_bytes", costs[i].output_bytes);
  }
  BATON_CHECK(finite_non_negative(options.comm_latency),
              "[partition] comm_latency must be finite and non-negative, got ",
              options.comm_latency);
  BATON_CHECK(
      finite_non_negative(options.comm_bytes_per_time),
      "[partition] comm_bytes_per_time must be finite and non-negative (0 = infinite), got ",
      options.comm_bytes_per_time);
  BATON_CHECK(finite_non_negative(options.memory_cap_bytes),
              "[partition] memory_cap_bytes must be finite and non-negative (0 = no cap), got ",
              options.memory_cap_bytes);
  const auto& in_flight = options.activations_in_flight;
  BATON_CHECK(in_flight.empty() || static_cast<int>(in_flight.size()) == stages,
              "[partition] activations_in_flight has ", in_flight.size(),
              " entries but the pipeline has ", stages, " stage", plural(stages));
  for (size_t s = 0; s < in_flight.size(); ++s) {
    BATON_CHECK(finite_non_negative(in_flight[s]), "[partition] activations_in_flight of stage ", s,
                " is ", in_flight[s], "; it must be finite and non-negative");
  }
}

}  // namespace detail

std::vector<double> one_f_one_b_in_flight(int stages) {
  BATON_CHECK(stages >= 1, "[partition] the pipeline needs at least 1 stage, got ", stages);
  std::vector<double> factors;
  for (int s = 0; s < stages; ++s) factors.push_back(stages - s);
  return factors;
}

const std::vector<std::string>& method_names() {
  static const std::vector<std::string> names = {"uniform", "params", "time", "memory", "optimal"};
  return names;
}

bool needs_layer_costs(std::string_view method) {
  return method == "params" || method == "time" || method == "memory" || method == "optimal";
}

Partition balance(std::string_view method, const std::vector<LayerCost>& costs, int stages,
                  const BalanceOptions& options) {
  const int layers = static_cast<int>(costs.size());
  if (method == "uniform") return uniform(layers, stages);
  if (method == "params") return by_params(costs, stages);
  if (method == "time") return by_time(costs, stages);
  if (method == "memory") return by_memory(costs, stages, options);
  if (method == "optimal") return optimal(costs, stages, options);
  if (looks_like_counts(method)) {
    detail::check_shape(layers, stages);
    return parse_partition(method, stages, layers);
  }
  std::string known;
  for (const auto& name : method_names()) known += name + ", ";
  BATON_CHECK(false, "[partition.balance] unknown method \"", std::string(method),
              "\" (known: ", known, "or comma-separated layer counts such as 3,5,4)");
  return {};
}

}  // namespace baton::partition
