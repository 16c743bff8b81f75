#include "baton/nn/recompute_region.h"

#include <torch/autograd.h>

#include "baton/core/error.h"
#include "baton/nn/autocast_state.h"

namespace baton::nn {
namespace {

// Whether regions are recomputed on this thread (SelectiveRecomputeScope).
thread_local bool selective = false;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the backward needs besides the inputs: the region, and autocast as
// the forward ran (so that the recomputation computes the same values).
struct Kept : torch::CustomClassHolder {
  Region region;
  AutocastState autocast;
};

// Forward without a graph, keeping the inputs; backward runs the region
// again with a graph and takes its inputs' gradients (a reentrant backward,
// as torch.utils.checkpoint's).
struct RegionFunction : torch::autograd::Function<RegionFunction> {
  static variable_list forward(AutogradContext* ctx, at::TensorList list, const Region& region) {
    const variable_list inputs = list.vec();
    ctx->save_for_backward(inputs);
    auto kept = c10::make_intrusive<Kept>();
    kept->region = region;
    kept->autocast = AutocastState::capture();
    ctx->saved_data["kept"] = c10::IValue::make_capsule(std::move(kept));
    torch::NoGradGuard no_grad;
    return {region(inputs)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto kept = c10::static_intrusive_pointer_cast<Kept>(ctx->saved_data["kept"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    variable_list inputs, wanted;
    for (const torch::Tensor& t : saved) {
      inputs.push_back(t.defined() ? t.detach().requires_grad_(t.requires_grad()) : t);
      if (inputs.back().defined() && inputs.back().requires_grad()) wanted.push_back(inputs.back());
    }
    variable_list grads(saved.size() + 1);  // + the region's (none)
    if (wanted.empty()) return grads;
    torch::Tensor output;
    {
      const AutocastState now = AutocastState::capture();
      kept->autocast.restore();
      torch::AutoGradMode grad_mode(true);
      output = kept->region(inputs);
      now.restore();
    }
    const variable_list found =
        torch::autograd::grad({output}, wanted, {grad_outputs.at(0)}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    size_t next = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined() && inputs[i].requires_grad()) grads[i] = found[next++];
    }
    return grads;
  }
};

}  // namespace

torch::Tensor recomputed_region(const Region& region, const std::vector<torch::Tensor>& inputs) {
  if (!selective || !torch::GradMode::is_enabled()) return region(inputs);
  // As a TensorList: autograd takes a std::vector argument for no tensor at all.
  variable_list outputs = RegionFunction::apply(at::TensorList(inputs), region);
  BATON_ASSERT(outputs.size() == 1, "a recomputed region returns one tensor");
  return outputs[0];
}

SelectiveRecomputeScope::SelectiveRecomputeScope(bool on) : previous_(selective) {
  selective = on;
}

SelectiveRecomputeScope::~SelectiveRecomputeScope() {
  selective = previous_;
}

bool selective_recompute_on() {
  return selective;
}

}  // namespace baton::nn
