// A Linear layer whose backward can defer its weight-gradient product, so a
// zero-bubble schedule can split backward into I (input gradient, on the
// critical path) and W (weight gradient, fills bubbles).
//
// With deferral off it is torch::nn::Linear: same parameters, same init, same
// gradients. With deferral on (set by the runtime around the I pass), backward
// computes only grad_input and stashes (input, grad_output); the W pass
// (run_weight_backward) later computes and accumulates weight.grad and
// bias.grad from the stash and frees it.
//
// Other layers (conv, norms, embeddings) fall back to plain autograd: their
// weight gradients are computed during I, so W has nothing to do for them and
// the split gives no overlap for those layers.
//
// Double backward through a deferred product is not supported.
#pragma once

#include <torch/nn/cloneable.h>
#include <torch/nn/options/linear.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "baton/nn/weight_grad.h"

namespace baton::nn {
namespace detail {

// What W needs, shared between a module and the autograd nodes of its
// forwards; thread-safe.
struct WeightGradStash : torch::CustomClassHolder {
  struct Item {
    torch::Tensor input;
    torch::Tensor grad_output;
    int64_t key = 0;
  };
  std::mutex mutex;
  // The module's parameters, whose .grad the backward accumulates into.
  torch::Tensor weight;
  torch::Tensor bias;
  bool defer = false;
  int64_t key = 0;
  std::vector<Item> items;
};

}  // namespace detail

class LinearImpl : public torch::nn::Cloneable<LinearImpl>, public DeferredWeightGrad {
 public:
  LinearImpl(int64_t in_features, int64_t out_features)
      : LinearImpl(torch::nn::LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const torch::nn::LinearOptions& options);

  void reset() override;
  // Same init as torch::nn::Linear: kaiming_uniform_(a = sqrt(5)) for the
  // weight, U(-1/sqrt(in), 1/sqrt(in)) for the bias.
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;

  // input [*, in_features] -> [*, out_features].
  torch::Tensor forward(const torch::Tensor& input);
  // forward(torch::gelu(pre)), an MLP's second product. Under selective
  // recomputation (nn/recompute_region.h), with a graph and without autocast,
  // the node keeps `pre` in place of gelu(pre), which the GELU's own node
  // keeps anyway, and runs the GELU again in its backward: an elementwise op
  // over 4h values a token, for 4h values a token less kept. The outputs and
  // gradients are the plain composition's bit for bit (the same gelu and
  // gelu_backward calls as GeluBackward's).
  torch::Tensor forward_gelu(const torch::Tensor& pre);

  // While on, every backward through this module stashes its weight-gradient
  // work under `key` (e.g. the micro-batch) instead of doing it. The flag is
  // read when backward runs, on whichever thread autograd uses.
  void set_defer_weight_grad(bool defer, int64_t key = 0) override;
  bool defer_weight_grad() const;

  // The W pass: computes the stashed weight/bias gradient products,
  // accumulates them into weight.grad / bias.grad (creating them if needed),
  // and frees the stash. Returns how many stashed products ran. The overload
  // with a key runs only the products stashed under that key.
  int run_weight_backward();
  int run_weight_backward(int64_t key) override;
  int pending_weight_backwards() const;

  torch::nn::LinearOptions options;
  torch::Tensor weight;
  torch::Tensor bias;

 private:
  int run_weight_backward_if(bool all, int64_t key);
  // One clear error line when `input`'s last dimension is not in_features.
  void check_width(const torch::Tensor& input) const;
  // The product with its own autograd node (DeferrableLinearBackward), which
  // keeps `kept`: the product's input, or with `gelu` the GELU's input, the
  // product then being of gelu(kept).
  torch::Tensor recorded_product(const torch::Tensor& kept, bool gelu);

  c10::intrusive_ptr<detail::WeightGradStash> stash_;
};

TORCH_MODULE(Linear);

// True when `module` is, or contains, a baton Linear (a layer whose W pass
// does work). Modules without one still run I and W; W is then a no-op.
bool supports_deferred_weight_grad(const torch::nn::Module& module);

// Turns deferral on or off for every baton Linear in the module tree.
void set_deferred_weight_grad(torch::nn::Module& module, bool defer, int64_t key = 0);

// Runs W for every baton Linear in the tree; returns how many stashed
// products ran. The overload with a key runs only those stashed under it.
int run_deferred_weight_backward(torch::nn::Module& module);
int run_deferred_weight_backward(torch::nn::Module& module, int64_t key);

// Stashed products not yet run, over the whole tree.
int pending_deferred_weight_backwards(const torch::nn::Module& module);

// Deferral on for the module tree while in scope (the runtime's I pass).
class DeferWeightGradScope {
 public:
  explicit DeferWeightGradScope(torch::nn::Module& module, int64_t key = 0);
  ~DeferWeightGradScope();
  DeferWeightGradScope(const DeferWeightGradScope&) = delete;
  DeferWeightGradScope& operator=(const DeferWeightGradScope&) = delete;

 private:
  torch::nn::Module& module_;
};

}  // namespace baton::nn
