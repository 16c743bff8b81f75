// Synthetic classification data for the MLP: inputs from a seeded normal,
// labels from a fixed random teacher (argmax of a random linear map), so a
// model can learn them and runs are reproducible.
#pragma once

#include "baton/data/batches.h"

#include <torch/arg.h>

#include <cstdint>

namespace baton::data {

struct SyntheticOptions {
  TORCH_ARG(int64_t, samples) = 1024;
  TORCH_ARG(int64_t, features) = 32;
  TORCH_ARG(int64_t, classes) = 10;
  // Draws the inputs.
  TORCH_ARG(uint64_t, seed) = 0;
  // Draws the teacher; keep it fixed to make train and test sets (different
  // seeds) share one labelling.
  TORCH_ARG(uint64_t, teacher_seed) = 0x7eac4e5;
};

// inputs float [samples, features] ~ N(0, 1); targets int64 [samples] =
// argmax(inputs @ W + b) for a teacher W [features, classes], b [classes] ~ N(0, 1).
// Deterministic in (seed, teacher_seed) and the sizes.
Examples synthetic_classification(const SyntheticOptions& options = {});

}  // namespace baton::data
