// Where training batches come from, by model: synthetic data for mlp,
// Fashion-MNIST for cnn, a text file for gpt and llama. Every rank builds the same
// source and draws the same batches (deterministic in the seed and step), so
// no data moves between ranks; a rank uses only what its stages need.
#pragma once

#include <torch/types.h>

#include <memory>
#include <utility>

#include "baton/train/config.h"

namespace baton::train {

class DataSource {
 public:
  virtual ~DataSource() = default;
  // The mini-batch of global step `step` (inputs, targets).
  virtual std::pair<torch::Tensor, torch::Tensor> batch(int64_t step) = 0;
  // Steps in one epoch; 0 when the source has no epochs (synthetic, text).
  virtual int64_t steps_per_epoch() const = 0;
  // A held-out set for accuracy; empty tensors when there is none.
  virtual std::pair<torch::Tensor, torch::Tensor> test_set() { return {}; }
};

// Throws baton::Error naming the file when the data is missing or malformed.
std::unique_ptr<DataSource> make_data_source(const TrainConfig& config);

// Checks that the data make_data_source needs is there and well formed,
// before ranks start: Fashion-MNIST is decompressed into its cache once and
// its headers, shapes and labels checked; the text file is read. Throws the
// same errors.
void check_data(const TrainConfig& config);

}  // namespace baton::train
