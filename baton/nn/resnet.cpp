#include "baton/nn/resnet.h"

#include "baton/core/error.h"

#include <torch/nn/functional/activation.h>

#include <algorithm>

namespace baton::nn {
namespace {

torch::nn::Conv2d make_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

}  // namespace

int64_t resnet_norm_groups(int64_t channels) {
  BATON_CHECK(channels >= 1, "[nn.resnet] a norm needs channels >= 1, got ", channels);
  int64_t groups = std::clamp<int64_t>(channels / 4, 1, 32);
  while (channels % groups != 0) --groups;
  return groups;
}

ResNetNormImpl::ResNetNormImpl(int64_t channels) {
  norm = register_module("norm", torch::nn::GroupNorm(torch::nn::GroupNormOptions(
                                     resnet_norm_groups(channels), channels)));
}

torch::Tensor ResNetNormImpl::forward(const torch::Tensor& x) {
  const auto dtype = norm->weight.scalar_type();
  return norm(x.scalar_type() == dtype ? x : x.to(dtype));
}

ResNetStemImpl::ResNetStemImpl(int64_t in_channels, int64_t out_channels) {
  BATON_CHECK(in_channels > 0 && out_channels > 0,
              "[nn.ResNetStem] sizes must be positive: in_channels ", in_channels,
              ", out_channels ", out_channels);
  conv = register_module("conv", make_conv(in_channels, out_channels, 3, 1));
  norm = register_module("norm", ResNetNorm(out_channels));
  pool = register_module("pool",
                         torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(3).stride(2).padding(1)));
}

torch::Tensor ResNetStemImpl::forward(const torch::Tensor& x) {
  return pool(torch::relu(norm(conv(x))));
}

BottleneckImpl::BottleneckImpl(int64_t in_channels, int64_t width, int64_t stride) {
  BATON_CHECK(in_channels > 0 && width > 0 && (stride == 1 || stride == 2),
              "[nn.Bottleneck] sizes must be positive and the stride 1 or 2: in_channels ",
              in_channels, ", width ", width, ", stride ", stride);
  const int64_t out = kExpansion * width;
  conv1 = register_module("conv1", make_conv(in_channels, width, 1, 1));
  norm1 = register_module("norm1", ResNetNorm(width));
  conv2 = register_module("conv2", make_conv(width, width, 3, stride));
  norm2 = register_module("norm2", ResNetNorm(width));
  conv3 = register_module("conv3", make_conv(width, out, 1, 1));
  norm3 = register_module("norm3", ResNetNorm(out));
  if (stride != 1 || in_channels != out) {
    shortcut_conv = register_module("shortcut_conv", make_conv(in_channels, out, 1, stride));
    shortcut_norm = register_module("shortcut_norm", ResNetNorm(out));
  }
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& x) {
  auto h = torch::relu(norm1(conv1(x)));
  h = torch::relu(norm2(conv2(h)));
  h = norm3(conv3(h));
  const auto shortcut = shortcut_conv ? shortcut_norm(shortcut_conv(x)) : x;
  return torch::relu(h + shortcut);
}

ResNetHeadImpl::ResNetHeadImpl(int64_t channels, int64_t classes) {
  fc = register_module("fc", Linear(channels, classes));
}

torch::Tensor ResNetHeadImpl::forward(const torch::Tensor& x) {
  BATON_CHECK(x.dim() == 4, "[nn.ResNetHead] expects [B, C, H, W], got ", x.dim(), " dimensions");
  return fc(x.mean({2, 3}));
}

}  // namespace baton::nn
