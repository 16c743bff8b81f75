// Random image augmentation for the image models (cnn, resnet): the
// translations and mirror images that keep a small network from memorising
// Fashion-MNIST's 60,000 training images. A function of the generator only,
// so every rank that draws from the same seed sees the same batch.
#pragma once

#include <ATen/core/Generator.h>
#include <torch/types.h>

#include <cstdint>

namespace baton::data {

struct AugmentOptions {
  // Each image moves by dx, dy drawn uniformly from [-shift, shift] pixels;
  // what it uncovers takes `fill` (0 leaves the image unchanged).
  int64_t shift = 2;
  // Each image is mirrored left to right with probability 1/2.
  bool flip = true;
  // The value of an uncovered pixel: the background after normalisation.
  double fill = 0;
};

// `images` float [N, C, H, W] augmented, a new tensor; `images` is unchanged.
// REQUIRES: images is 4-D, 0 <= shift < min(H, W).
torch::Tensor augment_images(const torch::Tensor& images, const AugmentOptions& options,
                             at::Generator& generator);

}  // namespace baton::data
