// A Partition cuts an ordered list of L layers into S contiguous pipeline
// stages (S = p x v): stage s holds layers [first_layer(s), end_layer(s)).
// LayerCost is what the balancing methods (balance.h) know about each layer.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace baton::partition {

// What one layer costs, per micro-batch. Times are in any one unit (the
// simulator's), bytes in bytes. All must be finite and non-negative.
struct LayerCost {
  double forward_time = 0;
  double backward_time = 0;     // full backward (input and weight gradients)
  double parameter_bytes = 0;   // weights, and whatever optimizer state the caller counts
  double activation_bytes = 0;  // stashed by this layer from its F until its B
  double output_bytes = 0;      // the boundary activation sent if this layer ends a stage

  LayerCost& set_forward_time(double t) {
    forward_time = t;
    return *this;
  }
  LayerCost& set_backward_time(double t) {
    backward_time = t;
    return *this;
  }
  LayerCost& set_parameter_bytes(double b) {
    parameter_bytes = b;
    return *this;
  }
  LayerCost& set_activation_bytes(double b) {
    activation_bytes = b;
    return *this;
  }
  LayerCost& set_output_bytes(double b) {
    output_bytes = b;
    return *this;
  }
};

// Layer counts per stage, each at least 1. Immutable once built.
class Partition {
 public:
  Partition() = default;  // no stages, no layers
  // Throws baton::Error if a count is below 1.
  explicit Partition(std::vector<int> layers_per_stage);

  int stages() const { return static_cast<int>(counts_.size()); }
  int layers() const { return first_.empty() ? 0 : first_.back(); }
  const std::vector<int>& layers_per_stage() const { return counts_; }

  // REQUIRES: 0 <= stage < stages().
  int layers_in(int stage) const { return counts_[stage]; }
  int first_layer(int stage) const { return first_[stage]; }
  int end_layer(int stage) const { return first_[stage + 1]; }  // one past its last layer

  // The first layer of every stage: {0, n0, n0 + n1, ...}, one entry a stage.
  std::vector<int> boundaries() const;
  // The stage holding `layer`; throws baton::Error if layer is not in [0, layers()).
  int stage_of_layer(int layer) const;

  // "3,5,4", the form parse_partition() reads back.
  std::string to_string() const;

  friend bool operator==(const Partition& a, const Partition& b) { return a.counts_ == b.counts_; }
  friend bool operator!=(const Partition& a, const Partition& b) { return !(a == b); }

 private:
  std::vector<int> counts_;
  std::vector<int> first_;  // prefix sums of counts_, stages() + 1 entries
};

std::ostream& operator<<(std::ostream& out, const Partition& partition);

// Reads a hand-written balance such as "3,5,4" (spaces around the numbers are
// allowed) for a model of `layers` layers cut into `stages` stages. Throws
// baton::Error naming the text and the offending value for: an empty list, a
// token that is not an integer, a count below 1, the wrong number of stages,
// or counts that do not sum to `layers`.
Partition parse_partition(std::string_view text, int stages, int layers);

}  // namespace baton::partition
