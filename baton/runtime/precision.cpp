#include "baton/runtime/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/nn/autocast_state.h"

namespace baton::runtime {
namespace {

using nn::autocast_dtype;
using nn::autocast_enabled;
using nn::set_autocast_dtype;
using nn::set_autocast_enabled;

}  // namespace

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
  BATON_CHECK(!(precision == Precision::Fp16 && device.is_cpu() && !nn::kAutocastByDevice),
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

CastCacheOff::CastCacheOff() : was_enabled_(at::autocast::is_autocast_cache_enabled()) {
  at::autocast::set_autocast_cache_enabled(false);
}

CastCacheOff::~CastCacheOff() {
  at::autocast::set_autocast_cache_enabled(was_enabled_);
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
