#include "baton/nn/linear.h"

#include "baton/core/error.h"
#include "baton/nn/autocast_state.h"
#include "baton/nn/recompute_region.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/nn/init.h>

#include <ATen/core/LegacyTypeDispatch.h>

#include <cmath>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace baton::nn {
namespace {

using torch::autograd::variable_list;

// Accumulates the weight and bias gradients of one (input, grad_output) pair
// straight into weight.grad / bias.grad: one GEMM with beta = 1, no temporary
// of the weight's size and no separate add (autograd's AccumulateGrad would
// make both, once per micro-batch).
void accumulate_weight_grads(const torch::Tensor& input, const torch::Tensor& grad_output,
                             torch::Tensor& weight, torch::Tensor& bias) {
  torch::NoGradGuard no_grad;
  // Under mixed precision (runtime/precision.h) the product runs in the
  // output gradient's dtype and is added into the fp32 gradient.
  const auto grad_2d = grad_output.reshape({-1, grad_output.size(-1)});
  const auto input_2d = input.reshape({-1, input.size(-1)}).to(grad_2d.scalar_type());
  if (weight.requires_grad()) {
    torch::Tensor& slot = weight.mutable_grad();
    if (slot.defined() && slot.scalar_type() == grad_2d.scalar_type()) {
      slot.addmm_(grad_2d.t(), input_2d);
    } else if (slot.defined()) {
      slot.add_(grad_2d.t().mm(input_2d));
    } else {
      slot = grad_2d.t().mm(input_2d).to(weight.scalar_type());
    }
  }
  if (bias.defined() && bias.requires_grad()) {
    torch::Tensor& slot = bias.mutable_grad();
    if (slot.defined()) {
      slot.add_(grad_2d.sum(0));
    } else {
      slot = grad_2d.sum(0).to(bias.scalar_type());
    }
  }
}

// The backward of one Linear: a hand-written autograd node, as ATen's own ops
// have, rather than a torch::autograd::Function. Measured on a 16-wide MLP
// (bench/RESULTS.md, "The Linear's own autograd node"), the Function's
// bookkeeping (its context's string-keyed map, its output wrapping) cost
// about 2.5 us a forward, as much as the GEMM itself at that size.
// Edges: 0 input, 1 weight, 2 bias (invalid without a bias). The weight and
// bias gradients are accumulated in place, or stashed for the W pass; autograd
// gets none to add. With `gelu` (LinearImpl::forward_gelu) the product's input
// is gelu(input): the node keeps `input` and runs the GELU again, and edge 0
// takes the gradient through the GELU, as GeluBackward's gelu_backward does.
class DeferrableLinearBackward : public torch::autograd::Node {
 public:
  DeferrableLinearBackward(const torch::Tensor& input, const torch::Tensor& weight,
                           c10::intrusive_ptr<detail::WeightGradStash> stash, bool gelu = false)
      : input_(input, /*is_output=*/false),
        weight_(weight, /*is_output=*/false),
        stash_(std::move(stash)),
        gelu_(gelu) {}

  std::string name() const override { return "baton::nn::LinearBackward"; }

  // Both under the node's mutex, as autograd asks of a node that releases
  // what it saved (two threads may run one graph's backward).
  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    input_.reset_data();
    weight_.reset_data();
  }

  variable_list apply(variable_list&& grads) override {
    const torch::Tensor& grad_output = grads[0];
    if (!grad_output.defined()) {
      return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    std::lock_guard<std::mutex> lock(mutex_);
    const torch::Tensor saved = input_.unpack();
    const torch::Tensor weight = weight_.unpack();
    torch::Tensor grad_input;
    if (task_should_compute_output(0)) {
      // Autocast ran the forward in the compute dtype; the backward follows it.
      grad_input = grad_output.matmul(weight.to(grad_output.scalar_type()));
      if (gelu_) grad_input = at::gelu_backward(grad_input, saved);
    }
    if (!task_should_compute_output({{1, 3}})) {
      return {grad_input, torch::Tensor(), torch::Tensor()};
    }
    const torch::Tensor input = gelu_ ? torch::gelu(saved) : saved;
    {
      std::lock_guard<std::mutex> lock(stash_->mutex);
      if (stash_->defer) {
        stash_->items.push_back({input, grad_output, stash_->key});
        return {grad_input, torch::Tensor(), torch::Tensor()};
      }
    }
    accumulate_weight_grads(input, grad_output, stash_->weight, stash_->bias);
    return {grad_input, torch::Tensor(), torch::Tensor()};
  }

 private:
  torch::autograd::SavedVariable input_;
  torch::autograd::SavedVariable weight_;
  c10::intrusive_ptr<detail::WeightGradStash> stash_;
  bool gelu_;
};

// LibTorch 1.13 holds autograd nodes by std::shared_ptr, 2.x by
// c10::intrusive_ptr: the pointer an Edge holds says which.
using NodePtr = decltype(torch::autograd::Edge::function);

template <typename NodeT, typename... Args>
NodePtr make_node(Args&&... args) {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<torch::autograd::Node>>) {
    return std::make_shared<NodeT>(std::forward<Args>(args)...);
  } else {
    return c10::make_intrusive<NodeT>(std::forward<Args>(args)...);
  }
}

// input [*, in] -> [*, out], by the transposed view as torch::nn::functional::linear
// does. A cached contiguous W^T (keyed by the weight's version counter) went
// stale under LibTorch 1.13's SGD, which updates through .data() without
// bumping the version; measured, the copy also won nothing (bench/RESULTS.md).
torch::Tensor linear_product(const torch::Tensor& input, const torch::Tensor& weight,
                             const torch::Tensor& bias) {
  const bool flat = input.dim() == 2;
  const torch::Tensor input_2d = flat ? input : input.reshape({-1, input.size(-1)});
  torch::Tensor out =
      bias.defined() ? torch::addmm(bias, input_2d, weight.t()) : input_2d.mm(weight.t());
  if (flat) {
    return out;
  }
  auto sizes = input.sizes().vec();
  sizes.back() = weight.size(0);
  return out.view(sizes);
}

}  // namespace

LinearImpl::LinearImpl(const torch::nn::LinearOptions& linear_options) : options(linear_options) {
  LinearImpl::reset();
}

void LinearImpl::reset() {
  BATON_CHECK(options.in_features() > 0 && options.out_features() > 0,
              "[nn.Linear] features must be positive: in_features ", options.in_features(),
              ", out_features ", options.out_features());
  weight =
      register_parameter("weight", torch::empty({options.out_features(), options.in_features()}));
  if (options.bias()) {
    bias = register_parameter("bias", torch::empty(options.out_features()));
  } else {
    bias = register_parameter("bias", {}, /*requires_grad=*/false);
  }
  stash_ = c10::make_intrusive<detail::WeightGradStash>();
  stash_->weight = weight;
  stash_->bias = bias;
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  // The same draws, in the same order, as torch::nn::LinearImpl.
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5));
  if (bias.defined()) {
    int64_t fan_in = 0;
    int64_t fan_out = 0;
    std::tie(fan_in, fan_out) = torch::nn::init::_calculate_fan_in_and_fan_out(weight);
    const double bound = 1 / std::sqrt(fan_in);
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

void LinearImpl::pretty_print(std::ostream& stream) const {
  stream << "baton::nn::Linear(in_features=" << options.in_features()
         << ", out_features=" << options.out_features() << ", bias=" << options.bias() << ")";
}

torch::Tensor LinearImpl::forward(const torch::Tensor& input) {
  if (!torch::autograd::compute_requires_grad(input, weight, bias)) {
    check_width(input);
    return linear_product(input, weight, bias);
  }
  return recorded_product(input, /*gelu=*/false);
}

torch::Tensor LinearImpl::forward_gelu(const torch::Tensor& pre) {
  if (!selective_recompute_on() || !torch::autograd::compute_requires_grad(pre, weight, bias)) {
    return forward(torch::gelu(pre));
  }
  const AutocastState autocast = AutocastState::capture();
  if (autocast.cpu_enabled || autocast.cuda_enabled) return forward(torch::gelu(pre));
  return recorded_product(pre, /*gelu=*/true);
}

void LinearImpl::check_width(const torch::Tensor& input) const {
  BATON_CHECK(input.dim() >= 1 && input.size(-1) == options.in_features(),
              "[nn.Linear] input's last dimension must be in_features ", options.in_features(),
              ": got shape ", input.sizes());
}

torch::Tensor LinearImpl::recorded_product(const torch::Tensor& kept, bool gelu) {
  check_width(kept);
  torch::Tensor out;
  {
    // Below autograd, as ATen's generated code runs an op's kernel; autocast,
    // which sits above autograd, still applies.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    out = linear_product(gelu ? torch::gelu(kept) : kept, weight, bias);
  }
  const NodePtr node = make_node<DeferrableLinearBackward>(kept, weight, stash_, gelu);
  node->set_next_edges(torch::autograd::collect_next_edges(kept, weight, bias));
  torch::autograd::set_history(out, node);
  return out;
}

void LinearImpl::set_defer_weight_grad(bool defer, int64_t key) {
  std::lock_guard<std::mutex> lock(stash_->mutex);
  stash_->defer = defer;
  stash_->key = key;
}

bool LinearImpl::defer_weight_grad() const {
  std::lock_guard<std::mutex> lock(stash_->mutex);
  return stash_->defer;
}

int LinearImpl::run_weight_backward() {
  return run_weight_backward_if(true, 0);
}

int LinearImpl::run_weight_backward(int64_t key) {
  return run_weight_backward_if(false, key);
}

int LinearImpl::run_weight_backward_if(bool all, int64_t key) {
  std::vector<detail::WeightGradStash::Item> work;
  {
    std::lock_guard<std::mutex> lock(stash_->mutex);
    std::vector<detail::WeightGradStash::Item> keep;
    for (auto& item : stash_->items) {
      (all || item.key == key ? work : keep).push_back(std::move(item));
    }
    stash_->items = std::move(keep);
  }
  torch::NoGradGuard no_grad;
  for (auto& item : work) {
    accumulate_weight_grads(item.input, item.grad_output, weight, bias);
    item = {};  // free the stashed activations as soon as they are used
  }
  return static_cast<int>(work.size());
}

int LinearImpl::pending_weight_backwards() const {
  std::lock_guard<std::mutex> lock(stash_->mutex);
  return static_cast<int>(stash_->items.size());
}

bool supports_deferred_weight_grad(const torch::nn::Module& module) {
  bool found = false;
  module.apply([&](const torch::nn::Module& m) {
    found = found || dynamic_cast<const LinearImpl*>(&m) != nullptr;
  });
  return found;
}

void set_deferred_weight_grad(torch::nn::Module& module, bool defer, int64_t key) {
  module.apply([&](torch::nn::Module& m) {
    if (auto* linear = dynamic_cast<LinearImpl*>(&m)) {
      linear->set_defer_weight_grad(defer, key);
    }
  });
}

int run_deferred_weight_backward(torch::nn::Module& module) {
  int ran = 0;
  module.apply([&](torch::nn::Module& m) {
    if (auto* linear = dynamic_cast<LinearImpl*>(&m)) {
      ran += linear->run_weight_backward();
    }
  });
  return ran;
}

int run_deferred_weight_backward(torch::nn::Module& module, int64_t key) {
  int ran = 0;
  module.apply([&](torch::nn::Module& m) {
    if (auto* linear = dynamic_cast<LinearImpl*>(&m)) {
      ran += linear->run_weight_backward(key);
    }
  });
  return ran;
}

int pending_deferred_weight_backwards(const torch::nn::Module& module) {
  int pending = 0;
  module.apply([&](const torch::nn::Module& m) {
    if (const auto* linear = dynamic_cast<const LinearImpl*>(&m)) {
      pending += linear->pending_weight_backwards();
    }
  });
  return pending;
}

DeferWeightGradScope::DeferWeightGradScope(torch::nn::Module& module, int64_t key)
    : module_(module) {
  set_deferred_weight_grad(module_, true, key);
}

DeferWeightGradScope::~DeferWeightGradScope() {
  set_deferred_weight_grad(module_, false);
}

}  // namespace baton::nn
