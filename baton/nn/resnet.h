// The layers of a ResNet with bottleneck blocks (He et al. 2016, ResNet-50's
// block) for small images, each one pipeline layer: a stem, the blocks, a
// head. Normalisation is GroupNorm, not BatchNorm: it has no batch statistics,
// so a micro-batch computes what the whole batch computes for its samples
// (docs/architecture.md, nn). The head's projection is a baton Linear.
#pragma once

#include "baton/nn/linear.h"

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <cstdint>

namespace baton::nn {

// The GroupNorm groups for `channels`: at most 32 (Wu & He 2018's default)
// and at least 4 channels a group where the channels allow, the largest such
// count that divides `channels`. REQUIRES: channels >= 1.
int64_t resnet_norm_groups(int64_t channels);

// GroupNorm(resnet_norm_groups(channels), channels), computed in its own
// dtype (fp32) whatever the input's, as layer_norm_fp32 does.
class ResNetNormImpl : public torch::nn::Module {
 public:
  explicit ResNetNormImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::GroupNorm norm{nullptr};
};
TORCH_MODULE(ResNetNorm);

// ResNet-50's stem scaled to small images: 3x3 conv (no bias, padding 1) +
// norm + ReLU, then ResNet-50's 3x3 max-pool of stride 2 (padding 1):
// [B, in, H, W] -> [B, out, ceil(H / 2), ceil(W / 2)].
class ResNetStemImpl : public torch::nn::Module {
 public:
  ResNetStemImpl(int64_t in_channels, int64_t out_channels);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Conv2d conv{nullptr};
  ResNetNorm norm{nullptr};
  torch::nn::MaxPool2d pool{nullptr};
};
TORCH_MODULE(ResNetStem);

// ResNet-50's bottleneck: 1x1 conv to `width`, 3x3 conv of `stride` (as
// torchvision's v1.5 puts the stride), 1x1 conv to 4 * width, each followed by
// a norm and all but the last by ReLU; the shortcut is the identity, or a
// strided 1x1 conv + norm when the shape changes; ReLU after the sum.
// [B, in, H, W] -> [B, 4 * width, ceil(H / stride), ceil(W / stride)].
// REQUIRES: sizes positive, stride 1 or 2.
class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int64_t in_channels, int64_t width, int64_t stride);
  torch::Tensor forward(const torch::Tensor& x);

  static constexpr int64_t kExpansion = 4;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr};
  ResNetNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  // Null for the identity shortcut.
  torch::nn::Conv2d shortcut_conv{nullptr};
  ResNetNorm shortcut_norm{nullptr};
};
TORCH_MODULE(Bottleneck);

// Global average pooling + Linear: [B, channels, H, W] -> logits [B, classes].
class ResNetHeadImpl : public torch::nn::Module {
 public:
  ResNetHeadImpl(int64_t channels, int64_t classes);
  torch::Tensor forward(const torch::Tensor& x);

  Linear fc{nullptr};
};
TORCH_MODULE(ResNetHead);

}  // namespace baton::nn
