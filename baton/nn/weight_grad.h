// The layer interface of a split backward: a layer that can leave its
// weight-gradient product for later, so a zero-bubble schedule runs the
// input gradient (I) on the critical path and the weight gradient (W) in a
// bubble. nn::Linear implements it; a user's own layer may too. The runtime
// asks every module of a stage for this interface, never for a concrete
// layer; a module without it computes its weight gradients during I.
#pragma once

#include <cstdint>

namespace baton::nn {

class DeferredWeightGrad {
 public:
  virtual ~DeferredWeightGrad() = default;
  // While on, every backward through the layer stashes its weight-gradient
  // work under `key` (the micro-batch) instead of doing it.
  virtual void set_defer_weight_grad(bool defer, int64_t key) = 0;
  // Runs the work stashed under `key`, accumulating into the parameters'
  // .grad, and frees it. Returns how many stashed products ran.
  virtual int run_weight_backward(int64_t key) = 0;
};

}  // namespace baton::nn
