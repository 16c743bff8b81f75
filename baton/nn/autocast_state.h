// Autocast's thread-local state across LibTorch versions (2.4 made the
// calls take the device type): runtime/precision.h's casts and a recomputed
// region's backward (recompute_region.h), which must compute as its forward did.
#pragma once

#include <torch/types.h>
#include <torch/version.h>

namespace baton::nn {

// LibTorch 2.4 made the autocast calls take the device type; its CPU
// autocast knows fp16 too.
inline constexpr bool kAutocastByDevice = TORCH_VERSION_MAJOR > 2 ||
                                          (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4);

bool autocast_enabled(torch::DeviceType device);
void set_autocast_enabled(torch::DeviceType device, bool enabled);
torch::ScalarType autocast_dtype(torch::DeviceType device);
void set_autocast_dtype(torch::DeviceType device, torch::ScalarType dtype);

// The CPU's and CUDA's autocast on or off, and their dtypes.
struct AutocastState {
  bool cpu_enabled = false;
  torch::ScalarType cpu_dtype = torch::kBFloat16;
  bool cuda_enabled = false;
  torch::ScalarType cuda_dtype = torch::kHalf;

  static AutocastState capture();
  void restore() const;
};

}  // namespace baton::nn
