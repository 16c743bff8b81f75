// Mixed precision: the dtype the layers compute in, with fp32 weights.
//
// Decision: autocast, as PyTorch's AMP, not Megatron's bf16 parameters with
// separate fp32 masters. The stages' parameters stay fp32 (they are the
// master weights the optimizer steps and the checkpoints hold); for the
// length of a step, autocast runs the matrix products and convolutions in
// the compute dtype, casting each weight once per step (the cast is cached
// while the step's autocast region is open, so every micro-batch shares one
// bf16/fp16 copy, refreshed from the masters at the next step). Gradients
// reach the fp32 parameters, so they accumulate in fp32 across micro-batches
// and the dp all-reduces run in fp32. A stage's output leaves in the compute
// dtype (half the bytes of fp32 over the pipeline), and the loss is computed
// in fp32 from the last stage's output cast up.
//
// fp16 adds dynamic loss scaling (LossScaler, PyTorch's GradScaler defaults:
// 2^16, halved on an overflow, doubled after 2000 clean steps).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string_view>

#include "baton/core/choices.h"

namespace baton::runtime {

// The enum and its parser live in core (torch-free; core/choices.h).
using ::baton::parse_precision;
using ::baton::Precision;
using ::baton::to_string;

// kFloat, kBFloat16, kHalf.
torch::ScalarType compute_dtype(Precision precision);

// Throws baton::Error (one line naming the LibTorch version) when this
// LibTorch cannot autocast `precision` on `device`: fp16 on the CPU needs
// LibTorch 2.x (1.13's CPU autocast knows bf16 only).
void check_precision_supported(Precision precision, torch::Device device);

// Autocast to the compute dtype on `device` while in scope (nothing for
// fp32); the weights' casts are cached until the outermost scope ends.
class AutocastScope {
 public:
  AutocastScope(Precision precision, torch::Device device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  torch::DeviceType device_ = torch::kCPU;
  bool was_enabled_ = false;
  torch::ScalarType was_dtype_ = torch::kFloat;
};

// While alive, autocast makes its casts afresh and caches none: a forward
// without a graph (a recomputed micro-batch's first F) would otherwise cache
// weight casts without history for the step, and LibTorch 1.13 would then
// give the weights behind them (a convolution's) no gradients in the
// recomputed forwards that use them (2.x caches no cast made without a
// graph).
class CastCacheOff {
 public:
  CastCacheOff();
  ~CastCacheOff();
  CastCacheOff(const CastCacheOff&) = delete;
  CastCacheOff& operator=(const CastCacheOff&) = delete;

 private:
  bool was_enabled_;
};

// fp16's dynamic loss scale: the loss is multiplied by scale() before the
// backward; after each step, update(finite) halves it when a gradient
// overflowed (the step is then skipped) and doubles it after
// `growth_interval` finite steps in a row.
class LossScaler {
 public:
  explicit LossScaler(double initial = 65536.0, int64_t growth_interval = 2000)
      : scale_(initial), growth_interval_(growth_interval) {}
  double scale() const { return scale_; }
  void update(bool finite);

 private:
  double scale_;
  int64_t growth_interval_;
  int64_t clean_ = 0;
};

}  // namespace baton::runtime
