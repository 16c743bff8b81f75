// Examples held as whole tensors, and a deterministic shuffled batcher over
// them: the same seed and epoch give the same batches on every rank.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/arg.h>
#include <torch/types.h>

#include <cstdint>

namespace baton::data {

// Aligned rows: inputs[i] goes with targets[i].
struct Examples {
  torch::Tensor inputs;
  torch::Tensor targets;

  int64_t size() const {
    return inputs.defined() ? inputs.size(0) : targets.defined() ? targets.size(0) : 0;
  }
};

// A CPU generator seeded with `seed`, for sample_batch and friends.
at::Generator make_generator(uint64_t seed);

struct BatchesOptions {
  explicit BatchesOptions(int64_t batch_size) : batch_size_(batch_size) {}
  TORCH_ARG(int64_t, batch_size);
  TORCH_ARG(uint64_t, seed) = 0;
  TORCH_ARG(bool, shuffle) = true;
  // Drop a last, smaller batch (keeps micro-batch splits even).
  TORCH_ARG(bool, drop_last) = false;
};

// Not thread-safe; each rank holds its own (they agree given the same seed).
class Batches {
 public:
  // REQUIRES: examples.inputs.size(0) == examples.targets.size(0) > 0, batch_size > 0.
  // Either may be undefined (a reader that needs only the other): its
  // batches are then undefined too, in the same order.
  Batches(Examples examples, BatchesOptions options);

  // Batches per epoch.
  int64_t size() const;
  // Reorders for `epoch`: the order is a function of (seed, epoch) only.
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }
  // REQUIRES: 0 <= index < size().
  Examples operator[](int64_t index) const;

 private:
  Examples examples_;
  BatchesOptions options_;
  int64_t epoch_ = 0;
  torch::Tensor order_;  // int64 [N]
};

}  // namespace baton::data
