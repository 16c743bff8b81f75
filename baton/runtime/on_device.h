// Moving a tensor to the device a rank's stages compute on.
#pragma once

#include <torch/types.h>

namespace baton::runtime {

// `tensor` on `device`: itself when it is there already (or undefined). From
// the host to a CUDA device the copy goes through pinned memory without
// blocking; every other move is a plain copy.
inline torch::Tensor on_device(const torch::Tensor& tensor, torch::Device device) {
  if (!tensor.defined() || tensor.device() == device) return tensor;
  if (tensor.device().is_cpu() && device.is_cuda()) {
    return tensor.pin_memory().to(device, /*non_blocking=*/true);
  }
  return tensor.to(device);
}

}  // namespace baton::runtime
