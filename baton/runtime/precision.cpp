#include "baton/runtime/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "baton/core/error.h"
#include "baton/core/printable.h"

// LibTorch 2.4 made the autocast calls take the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define BATON_AUTOCAST_BY_DEVICE 1
#else
#define BATON_AUTOCAST_BY_DEVICE 0
#endif

namespace baton::runtime {
namespace {

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

}  // namespace

Precision parse_precision(std::string_view text) {
  if (text == "fp32") return Precision::Fp32;
  if (text == "bf16") return Precision::Bf16;
  if (text == "fp16") return Precision::Fp16;
  throw Error(::baton::detail::concat("[runtime.precision] unknown precision \"", printable(text),
                                      "\" (expected fp32, bf16 or fp16)"));
}

std::string_view to_string(Precision precision) {
  switch (precision) {
    case Precision::Bf16:
      return "bf16";
    case Precision::Fp16:
      return "fp16";
    case Precision::Fp32:
      break;
  }
  return "fp32";
}

torch::ScalarType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::Bf16:
      return torch::kBFloat16;
    case Precision::Fp16:
      return torch::kHalf;
    case Precision::Fp32:
      break;
  }
  return torch::kFloat;
}

void check_precision_supported(Precision precision, torch::Device device) {
  BATON_CHECK(!(precision == Precision::Fp16 && device.is_cpu() && !BATON_AUTOCAST_BY_DEVICE),
              "[runtime.precision] fp16 on the CPU needs LibTorch 2.4 or later; this is LibTorch ",
              TORCH_VERSION, ", whose CPU autocast computes in bf16 only (use --precision bf16)");
  BATON_CHECK(device.is_cpu() || device.is_cuda() || precision == Precision::Fp32,
              "[runtime.precision] ", to_string(precision), " runs on the CPU or CUDA, not on ",
              device.str());
}

AutocastScope::AutocastScope(Precision precision, torch::Device device) {
  if (precision == Precision::Fp32) return;
  active_ = true;
  device_ = device.type();
  was_enabled_ = autocast_enabled(device_);
  was_dtype_ = autocast_dtype(device_);
  set_autocast_enabled(device_, true);
  set_autocast_dtype(device_, compute_dtype(precision));
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  // The outermost scope drops the step's cached weight casts.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(device_, was_enabled_);
  set_autocast_dtype(device_, was_dtype_);
}

void LossScaler::update(bool finite) {
  if (!finite) {
    scale_ /= 2;
    clean_ = 0;
    return;
  }
  if (++clean_ >= growth_interval_) {
    scale_ *= 2;
    clean_ = 0;
  }
}

}  // namespace baton::runtime
