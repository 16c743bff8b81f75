#include "baton/nn/recompute_region.h"

#include <torch/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>

#include <algorithm>

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

// autograd's bmm derivative for its first operand, grad.bmm(mat2^T), as a
// node of the recomputed graph: the probabilities' gradient from the
// product's, shaped as the probabilities.
struct ProductGradient : torch::autograd::Node {
  torch::Tensor values3;  // [batch, cols, width], as matmul folds them
  std::vector<int64_t> sizes;

  variable_list apply(variable_list&& grads) override {
    variable_list out{grads.at(0).bmm(values3.transpose(1, 2)).reshape(sizes)};
    values3.reset();
    return out;
  }
};

// A graph node of type N, held as this LibTorch's edges hold nodes
// (std::shared_ptr up to 2.x; c10::intrusive_ptr in later 2.x).
template <class Held>
struct NodeMaker;
template <class Base>
struct NodeMaker<std::shared_ptr<Base>> {
  template <class N>
  static std::shared_ptr<N> make() {
    return std::make_shared<N>();
  }
};
template <class Base>
struct NodeMaker<c10::intrusive_ptr<Base>> {
  template <class N>
  static c10::intrusive_ptr<N> make() {
    return c10::make_intrusive<N>();
  }
};
template <class N>
auto make_node() {
  return NodeMaker<decltype(torch::autograd::Edge::function)>::template make<N>();
}

// The probabilities' region with `values` last among the saved: forward
// without a graph; backward runs the probabilities again with a graph and
// takes the product's gradients as autograd's matmul would (both operands
// folded to [batch, rows, cols] and multiplied by bmm, whose derivatives
// are grad.bmm(mat2^T) and self^T.bmm(grad)).
struct ProductFunction : torch::autograd::Function<ProductFunction> {
  static variable_list forward(AutogradContext* ctx, at::TensorList list, const Region& region) {
    variable_list inputs = list.vec();
    const torch::Tensor values = inputs.back();
    inputs.pop_back();
    ctx->save_for_backward(list.vec());
    auto kept = c10::make_intrusive<Kept>();
    kept->region = region;
    ctx->saved_data["kept"] = c10::IValue::make_capsule(std::move(kept));
    torch::NoGradGuard no_grad;
    return {region(inputs).matmul(values)};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto kept = c10::static_intrusive_pointer_cast<Kept>(ctx->saved_data["kept"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor values = saved.back();
    variable_list inputs, wanted;
    for (size_t i = 0; i + 1 < saved.size(); ++i) {
      const torch::Tensor& t = saved[i];
      inputs.push_back(t.defined() ? t.detach().requires_grad_(t.requires_grad()) : t);
      if (inputs.back().defined() && inputs.back().requires_grad()) wanted.push_back(inputs.back());
    }
    variable_list grads(saved.size() + 1);  // + the region's (none)
    torch::Tensor p;
    {
      torch::AutoGradMode grad_mode(!wanted.empty());
      p = kept->region(inputs);
    }
    const int64_t rows = p.size(-2), cols = p.size(-1), width = values.size(-1);
    const int64_t batch = p.numel() / std::max<int64_t>(1, rows * cols);
    const torch::Tensor grad3 = grad_outputs.at(0).reshape({batch, rows, width});
    if (values.requires_grad()) {
      grads[saved.size() - 1] = p.detach()
                                    .reshape({batch, rows, cols})
                                    .transpose(1, 2)
                                    .bmm(grad3)
                                    .reshape(values.sizes());
    }
    if (wanted.empty()) return grads;
    // The probabilities' gradient comes from a node the engine runs first,
    // so that it and the probabilities live only until the softmax's
    // backward has read them, as in the plain region's graph.
    auto product = make_node<ProductGradient>();
    product->values3 = values.reshape({batch, cols, width});
    product->sizes = p.sizes().vec();
    product->add_input_metadata(grad3);
    product->add_next_edge(torch::autograd::impl::gradient_edge(p));
    p.reset();
    torch::autograd::edge_list ends;
    for (const torch::Tensor& w : wanted) ends.push_back(torch::autograd::impl::gradient_edge(w));
    const variable_list found = torch::autograd::Engine::get_default_engine().execute(
        {torch::autograd::Edge(std::move(product), 0)}, {grad3}, /*keep_graph=*/false,
        /*create_graph=*/false, /*accumulate_grad=*/false, ends);
    size_t next = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined() && inputs[i].requires_grad()) grads[i] = found[next++];
    }
    return grads;
  }
};

bool autocasting() {
  const AutocastState now = AutocastState::capture();
  return now.cpu_enabled || now.cuda_enabled;
}

}  // namespace

torch::Tensor recomputed_product(const Region& probabilities,
                                 const std::vector<torch::Tensor>& inputs,
                                 const torch::Tensor& values) {
  if (!selective || !torch::GradMode::is_enabled()) return probabilities(inputs).matmul(values);
  std::vector<torch::Tensor> all = inputs;
  all.push_back(values);
  if (autocasting()) {
    return recomputed_region(
        [probabilities](const std::vector<torch::Tensor>& in) {
          return probabilities({in.begin(), in.end() - 1}).matmul(in.back());
        },
        all);
  }
  BATON_ASSERT(values.dim() >= 3, "recomputed_product takes values of at least 3 dimensions");
  variable_list outputs = ProductFunction::apply(at::TensorList(all), probabilities);
  return outputs[0];
}

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
