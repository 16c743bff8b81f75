#include "baton/nn/linear.h"

#include "baton/core/error.h"

#include <torch/autograd.h>
#include <torch/nn/init.h>

#include <cmath>
#include <tuple>
#include <utility>

namespace baton::nn {
namespace {

using torch::autograd::AutogradContext;
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

class DeferrableLinearFunction : public torch::autograd::Function<DeferrableLinearFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& input,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& bias,
                               c10::intrusive_ptr<detail::WeightGradStash> stash) {
    ctx->save_for_backward({input, weight});
    ctx->saved_data["has_bias"] = bias.has_value();
    ctx->saved_data["stash"] = c10::IValue::make_capsule(std::move(stash));
    // By the transposed view, as torch::nn::functional::linear does. A cached
    // contiguous W^T (keyed by the weight's version counter) went stale under
    // LibTorch 1.13's SGD, which updates through .data() without bumping the
    // version; measured, the copy also won nothing (bench/RESULTS.md).
    const auto input_2d = input.reshape({-1, input.size(-1)});
    const torch::Tensor weight_t = weight.t();
    torch::Tensor out =
        bias.has_value() ? torch::addmm(*bias, input_2d, weight_t) : input_2d.mm(weight_t);
    auto sizes = input.sizes().vec();
    sizes.back() = weight.size(0);
    return out.view(sizes);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& input = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& grad_output = grad_outputs[0];
    const bool has_bias = ctx->saved_data["has_bias"].toBool();

    torch::Tensor grad_input;
    if (ctx->needs_input_grad(0)) {
      // Autocast ran the forward in the compute dtype; the backward follows it.
      grad_input = grad_output.matmul(weight.to(grad_output.scalar_type()));
    }
    const bool wants_weight = ctx->needs_input_grad(1) || (has_bias && ctx->needs_input_grad(2));
    if (!wants_weight) {
      return {grad_input, torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
    const auto holder = ctx->saved_data["stash"].toCapsule();
    auto* stash = dynamic_cast<detail::WeightGradStash*>(holder.get());
    BATON_ASSERT(stash != nullptr, "[nn.Linear] backward lost its weight-gradient stash");
    {
      std::lock_guard<std::mutex> lock(stash->mutex);
      if (stash->defer) {
        stash->items.push_back({input, grad_output, stash->key});
        return {grad_input, torch::Tensor(), torch::Tensor(), torch::Tensor()};
      }
    }
    // Accumulated in place; autograd gets no weight gradient to add.
    accumulate_weight_grads(input, grad_output, stash->weight, stash->bias);
    return {grad_input, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

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
  BATON_CHECK(input.dim() >= 1 && input.size(-1) == options.in_features(),
              "[nn.Linear] input's last dimension must be in_features ", options.in_features(),
              ": got shape ", input.sizes());
  // An absent bias goes in as nullopt: autograd rejects an undefined tensor input.
  const c10::optional<torch::Tensor> maybe_bias =
      bias.defined() ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
  return DeferrableLinearFunction::apply(input, weight, maybe_bias, stash_);
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
