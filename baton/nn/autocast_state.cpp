#include "baton/nn/autocast_state.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

// LibTorch 2.4 made the autocast calls take the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define BATON_AUTOCAST_BY_DEVICE 1
#else
#define BATON_AUTOCAST_BY_DEVICE 0
#endif

namespace baton::nn {

bool autocast_enabled(torch::DeviceType device) {
#if BATON_AUTOCAST_BY_DEVICE
  return at::autocast::is_autocast_enabled(device);
#else
  return device == torch::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
#endif
}

void set_autocast_enabled(torch::DeviceType device, bool enabled) {
#if BATON_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == torch::kCPU) {
    at::autocast::set_cpu_enabled(enabled);
  } else {
    at::autocast::set_enabled(enabled);
  }
#endif
}

torch::ScalarType autocast_dtype(torch::DeviceType device) {
#if BATON_AUTOCAST_BY_DEVICE
  return at::autocast::get_autocast_dtype(device);
#else
  return device == torch::kCPU ? at::autocast::get_autocast_cpu_dtype()
                               : at::autocast::get_autocast_gpu_dtype();
#endif
}

void set_autocast_dtype(torch::DeviceType device, torch::ScalarType dtype) {
#if BATON_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == torch::kCPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
#endif
}

AutocastState AutocastState::capture() {
  return {autocast_enabled(torch::kCPU), autocast_dtype(torch::kCPU),
          autocast_enabled(torch::kCUDA), autocast_dtype(torch::kCUDA)};
}

void AutocastState::restore() const {
  set_autocast_enabled(torch::kCPU, cpu_enabled);
  set_autocast_dtype(torch::kCPU, cpu_dtype);
  set_autocast_enabled(torch::kCUDA, cuda_enabled);
  set_autocast_dtype(torch::kCUDA, cuda_dtype);
}

}  // namespace baton::nn
