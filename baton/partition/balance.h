// Balancing methods: each cuts L layers into S contiguous stages, given what
// every layer costs (LayerCost), and returns the Partition. balance() picks a
// method by name, as the CLI's --balance does.
//
// Every method REQUIRES 1 <= stages <= layers and finite, non-negative costs,
// and throws baton::Error (naming the values) otherwise. Every method is
// deterministic: among equally good partitions it returns the one whose stage
// loads have the smallest sum of squares (the evenest), then the one with the
// evenest layer counts, then the one whose counts are lexicographically largest
// (earlier stages take the extra layers); so equal layers, or layers that all
// cost nothing, give the uniform partition.
// Cost: O(S L^2) time, O(S L) memory.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "baton/partition/partition.h"

namespace baton::partition {

struct BalanceOptions {
  // The link between consecutive stages, as in sim::CostModel.
  double comm_latency = 0;         // time per boundary transfer
  double comm_bytes_per_time = 0;  // bandwidth; 0 means infinite
  // Per-stage memory limit for optimal(): parameter bytes + in-flight factor x
  // activation bytes. 0 means no limit. The other methods ignore it.
  double memory_cap_bytes = 0;
  // How many micro-batches' activations stage s holds at its peak, one entry a
  // stage (1F1B with p = S ranks: S - s; GPipe: m). Empty means 1 for every
  // stage. Used by optimal() and by_memory().
  std::vector<double> activations_in_flight;

  BalanceOptions& set_comm_latency(double t) {
    comm_latency = t;
    return *this;
  }
  BalanceOptions& set_comm_bytes_per_time(double b) {
    comm_bytes_per_time = b;
    return *this;
  }
  BalanceOptions& set_memory_cap_bytes(double b) {
    memory_cap_bytes = b;
    return *this;
  }
  BalanceOptions& set_activations_in_flight(std::vector<double> f) {
    activations_in_flight = std::move(f);
    return *this;
  }
};

// The in-flight factors of 1F1B with one stage per rank: stage s of S holds S - s.
std::vector<double> one_f_one_b_in_flight(int stages);

// L = q S + r: the first r stages get q + 1 layers, the others q.
Partition uniform(int layers, int stages);  // "uniform"
// Minimises the largest stage's parameter bytes.
Partition by_params(const std::vector<LayerCost>& costs, int stages);  // "params"
// Minimises the largest stage's forward + backward time.
Partition by_time(const std::vector<LayerCost>& costs, int stages);  // "time"
// Minimises the largest stage's parameter bytes + in-flight x activation bytes.
Partition by_memory(const std::vector<LayerCost>& costs, int stages,
                    const BalanceOptions& options = {});  // "memory"
// Minimises the slowest stage's time (stage_load.h: compute plus sending its
// boundary both ways) subject to options.memory_cap_bytes. Throws baton::Error
// naming the cap and the smallest feasible cap when no partition fits.
Partition optimal(const std::vector<LayerCost>& costs, int stages,
                  const BalanceOptions& options = {});  // "optimal"

// The method names balance() accepts, in a stable order.
const std::vector<std::string>& method_names();
// Whether `method` balances measured per-layer costs (params, time, memory,
// optimal), so that the layers must be profiled first; uniform and explicit
// counts ("3,1") need nothing.
bool needs_layer_costs(std::string_view method);

// Runs the named method, or parses `method` as hand-written counts ("3,5,4")
// when it starts with a digit or sign or holds a comma. Throws baton::Error
// listing the methods for an unknown name.
Partition balance(std::string_view method, const std::vector<LayerCost>& costs, int stages,
                  const BalanceOptions& options = {});

namespace detail {
// The checks every method shares: 1 <= stages <= costs.size(), costs finite
// and non-negative, options well formed for `stages`.
void check_problem(const std::vector<LayerCost>& costs, int stages,
                   const BalanceOptions& options = {});
void check_shape(int layers, int stages);
}  // namespace detail

}  // namespace baton::partition
