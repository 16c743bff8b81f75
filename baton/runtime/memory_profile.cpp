#include "baton/runtime/memory_profile.h"

#include <torch/autograd.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/variable.h>

#include <functional>

#include "baton/comm/memory_counter.h"
#include "baton/comm/tensor_bundle.h"
#include "baton/nn/weight_grad.h"

namespace baton::runtime {
namespace {

using Call = std::function<nn::Tensors(const nn::Tensors&)>;
using NodePtr = decltype(torch::autograd::Edge::function);

double held() {
  return static_cast<double>(comm::memory_figures().current_bytes);
}
double peak() {
  return static_cast<double>(comm::memory_figures().peak_bytes);
}

// Copies of `x` made now, recorded from leaves for the floating-point ones,
// so that dropping them frees them unless a graph saved them.
struct Fresh {
  nn::Tensors leaves;
  nn::Tensors values;
};

Fresh fresh(const nn::Tensors& x) {
  Fresh in;
  for (const auto& t : x) {
    if (t.defined() && t.is_floating_point()) {
      in.leaves.push_back(t.detach().requires_grad_(true));
      in.values.push_back(in.leaves.back().clone());
    } else {
      in.values.push_back(t.defined() ? t.clone() : t);
    }
  }
  return in;
}

// A backward from `out`'s recorded tensors, seeded with ones.
void run_backward(const nn::Tensors& out) {
  std::vector<torch::Tensor> roots, seeds;
  for (const auto& y : out) {
    if (y.defined() && y.requires_grad()) {
      roots.push_back(y);
      seeds.push_back(torch::ones_like(y));
    }
  }
  if (!roots.empty()) torch::autograd::backward(roots, seeds);
}

// The layers of `module` (itself included) that can defer their weight gradients.
std::vector<nn::DeferredWeightGrad*> deferring(torch::nn::Module* module) {
  std::vector<nn::DeferredWeightGrad*> out;
  if (module == nullptr) return out;
  for (auto& child : module->modules(/*include_self=*/true)) {
    if (auto* layer = dynamic_cast<nn::DeferredWeightGrad*>(child.get())) out.push_back(layer);
  }
  return out;
}

// Deferral on for `layers` while in scope (a split backward's I).
class DeferScope {
 public:
  explicit DeferScope(const std::vector<nn::DeferredWeightGrad*>& layers) : layers_(layers) {
    for (auto* layer : layers_) layer->set_defer_weight_grad(true, 0);
  }
  ~DeferScope() {
    for (auto* layer : layers_) layer->set_defer_weight_grad(false, 0);
  }
  DeferScope(const DeferScope&) = delete;
  DeferScope& operator=(const DeferScope&) = delete;

 private:
  const std::vector<nn::DeferredWeightGrad*>& layers_;
};

// `x` as the next stage receives it: floating tensors in the compute dtype.
nn::Tensors as_received(const nn::Tensors& x, Precision precision) {
  nn::Tensors out;
  for (const auto& t : x) {
    const bool cast = t.defined() && t.is_floating_point();
    out.push_back(cast ? t.to(compute_dtype(precision)) : t);
  }
  return out;
}

// One call on `x`: what its graph keeps, its temporaries, and its backward's;
// with `split` layers, what a split backward's I leaves for its W.
sim::LayerMemory measure_call(const Call& call, const nn::Tensors& x, Precision precision,
                              const std::vector<nn::DeferredWeightGrad*>& split = {}) {
  const auto under_autocast = [&](const nn::Tensors& input) {
    AutocastScope autocast(precision, torch::kCPU);
    return call(input);
  };
  {  // Warm-up: the parameters' gradients and any lazily made state exist after it.
    Fresh in = fresh(x);
    run_backward(under_autocast(in.values));
  }
  sim::LayerMemory m;
  m.input_bytes = nn::bytes_of(x);
  // One autocast region over the measurement, as the executor keeps one over
  // a step: each weight is cast once, at its first use in the step, and the
  // cast stays cached until the step ends, shared by every micro-batch. The
  // casts are measured apart, so that the graph's bytes are a micro-batch's
  // own (resnet in bf16 read 1.2-2.9x with them counted per micro-batch).
  AutocastScope region(precision, torch::kCPU);
  if (precision != Precision::Fp32) {
    const double before = held();
    {
      // With a graph: a cast made without one would be cached without its
      // history, and the weights would get no gradients through it.
      Fresh in = fresh(x);
      under_autocast(in.values);
    }
    m.weight_cast_bytes = std::max(0.0, held() - before);
  }
  {
    const double base = held();
    Fresh in = fresh(x);
    comm::reset_memory_peak();
    nn::Tensors out = under_autocast(in.values);
    const double after = held();
    m.forward_extra = std::max(0.0, peak() - after);
    m.output_bytes = nn::bytes_of(out);
    std::vector<NodePtr> graph;
    for (const auto& y : out) {
      if (y.defined() && y.grad_fn()) graph.push_back(y.grad_fn());
    }
    in.values.clear();
    const double without_input = held();
    m.keeps_input = m.input_bytes > 0 && after - without_input < m.input_bytes / 2;
    out.clear();
    const double graph_only = held();
    m.keeps_output = m.output_bytes > 0 && without_input - graph_only < m.output_bytes / 2;
    // The leaves (views of x, allocated before `base`) stay out of the count.
    m.graph_bytes = std::max(0.0, graph_only - base);
  }
  {
    // On the gradient coming in, held all through the backward (as a stage
    // holds the gradient it received); the output and input dropped, as
    // where only the graph saved them.
    Fresh in = fresh(x);
    torch::autograd::edge_list roots;
    std::vector<torch::Tensor> seeds;
    for (const auto& y : under_autocast(in.values)) {
      if (!y.defined() || !y.requires_grad()) continue;
      roots.push_back(torch::autograd::impl::gradient_edge(y));
      seeds.push_back(torch::ones_like(y));
    }
    in.values.clear();
    const double before = held();
    comm::reset_memory_peak();
    if (!roots.empty()) {
      torch::autograd::Engine::get_default_engine().execute(roots, seeds, /*keep_graph=*/false,
                                                            /*create_graph=*/false,
                                                            /*accumulate_grad=*/true);
    }
    m.backward_extra = std::max(0.0, peak() - before);
  }
  // As a layer inside a stage runs its backward (with `deferred`'s weight
  // gradients deferred: an I): from what was held before its forward, with
  // its graph, the gradient coming in as the layer after it made it (a
  // tensor only the engine holds, freed once used: the gradient of y * 1),
  // its temporaries and its input's gradient.
  const auto inside_peak = [&](const std::vector<nn::DeferredWeightGrad*>& deferred) {
    const double base = held();
    Fresh in = fresh(x);
    torch::Tensor root;
    {
      nn::Tensors out = under_autocast(in.values);
      in.values.clear();
      for (const auto& y : out) {
        if (!y.defined() || !y.requires_grad()) continue;
        const torch::Tensor part = y.mul(1.0).sum();
        root = root.defined() ? root + part : part;
      }
    }
    comm::reset_memory_peak();
    {
      DeferScope defer(deferred);
      if (root.defined()) root.backward();
    }
    return std::max(0.0, peak() - base);
  };
  m.backward_peak_bytes = inside_peak({});
  if (!split.empty()) {
    // I with the weight gradients deferred, as zero-bubble schedules run it,
    // on the gradient coming in held throughout (the stage's last layer on
    // the gradient it received): its peak above its start (as
    // backward_extra); then what stays once the graph, the input and its
    // gradient are dropped is the W's stash (its inputs and output
    // gradients), with the gradient coming in where the W keeps that tensor.
    const double base = held();
    double seed_bytes = 0, with_seeds = 0;
    {
      torch::autograd::edge_list roots;
      std::vector<torch::Tensor> seeds;
      {
        Fresh in = fresh(x);
        for (const auto& y : under_autocast(in.values)) {
          if (!y.defined() || !y.requires_grad()) continue;
          roots.push_back(torch::autograd::impl::gradient_edge(y));
          seeds.push_back(torch::ones_like(y));
          seed_bytes += nn::bytes_of({seeds.back()});
        }
        in.values.clear();
        const double before = held();
        comm::reset_memory_peak();
        DeferScope defer(split);
        if (!roots.empty()) {
          torch::autograd::Engine::get_default_engine().execute(
              roots, seeds, /*keep_graph=*/false, /*create_graph=*/false, /*accumulate_grad=*/true);
        }
        m.input_backward_extra = std::max(0.0, peak() - before);
        roots.clear();
      }
      with_seeds = held();
    }
    m.weight_stash_bytes = std::max(0.0, held() - base);
    // Dropping the seeds freed what the W did not keep of them.
    m.weight_stash_output_gradient_bytes = std::max(0.0, seed_bytes - (with_seeds - held()));
    for (auto* layer : split) layer->run_weight_backward(0);
    m.input_backward_peak_bytes = inside_peak(split);
    for (auto* layer : split) layer->run_weight_backward(0);
  }
  return m;
}

// A stage boundary carrying `x` as the executor hands it on (executor.cpp):
// its floating tensors in the compute dtype. Its bytes, and the bundles it
// crosses in, forward and back (a gradient for each floating tensor, none
// for the rest); 0: not a bundle.
struct Boundary {
  double wire = 0;
  double output_message = 0;
  double gradient_message = 0;
};

Boundary boundary_of(const nn::Tensors& x, Precision precision) {
  Boundary b;
  std::vector<at::Tensor> forward, back;  // shapes only (meta tensors)
  for (const auto& t : x) {
    if (!t.defined()) {
      forward.emplace_back();
      back.emplace_back();
      continue;
    }
    const bool floating = t.is_floating_point();
    const auto dtype =
        floating && precision != Precision::Fp32 ? compute_dtype(precision) : t.scalar_type();
    at::Tensor shape = at::empty(t.sizes(), at::TensorOptions().dtype(dtype).device(at::kMeta));
    b.wire += static_cast<double>(shape.numel()) * static_cast<double>(shape.element_size());
    forward.push_back(shape);
    back.push_back(floating ? shape : at::Tensor());
  }
  if (comm::bundles(forward)) b.output_message = static_cast<double>(comm::message_bytes(forward));
  if (comm::bundles(back)) b.gradient_message = static_cast<double>(comm::message_bytes(back));
  return b;
}

}  // namespace

sim::ModelMemory measure_model_memory(const nn::ModelSpec& model, const nn::Tensors& sample,
                                      uint64_t seed, Precision precision) {
  comm::install_memory_counter();
  sim::ModelMemory memory;
  memory.microbatch = sample.empty() || !sample.front().defined() || sample.front().dim() == 0
                          ? 1
                          : static_cast<double>(sample.front().size(0));
  nn::SkipFrame skips(/*keep=*/true);  // each layer runs several times
  nn::Tensors x = sample;
  nn::LayerSlot previous;
  for (int i = 0; i < model.num_layers(); ++i) {
    nn::LayerSlot layer{nn::build_layer(model, i, seed), i, model.layers[i].name};
    const nn::LayerSlot* before = i > 0 ? &previous : nullptr;
    const Call call = [&](const nn::Tensors& input) {
      return nn::call_layer(layer, input, before);
    };
    const auto split = deferring(layer.module.ptr().get());
    memory.layers.push_back(measure_call(call, x, precision, split));
    // As a stage starting here receives its input (executor.cpp): floating
    // tensors in the compute dtype, which changes what the layer keeps (a
    // LayerNorm under autocast keeps an fp32 copy of a bf16 input).
    memory.stage_inputs.push_back(
        i == 0 || precision == Precision::Fp32
            ? memory.layers.back()
            : measure_call(call, as_received(x, precision), precision, split));
    if (precision != Precision::Fp32) {
      // The casts autograd carries gradients back through: all but those of
      // the layers that accumulate their own weight gradients (a baton
      // Linear casts below autograd, with no graph).
      double own = 0;
      for (auto* deferred : split) {
        if (const auto* module = dynamic_cast<const torch::nn::Module*>(deferred)) {
          for (const auto& p : module->parameters(/*recurse=*/false)) {
            own += static_cast<double>(p.numel()) *
                   static_cast<double>(c10::elementSize(compute_dtype(precision)));
          }
        }
      }
      for (sim::LayerMemory* l : {&memory.layers.back(), &memory.stage_inputs.back()})
        l->cast_gradient_bytes = std::max(0.0, l->weight_cast_bytes - own);
    }
    {
      torch::NoGradGuard no_grad;
      AutocastScope autocast(precision, torch::kCPU);
      x = call(x);
    }
    // As a stage hands it on, and the messages a boundary here crosses in.
    const Boundary boundary = boundary_of(x, precision);
    for (sim::LayerMemory* l : {&memory.layers.back(), &memory.stage_inputs.back()}) {
      l->output_wire_bytes = boundary.wire;
      l->output_message_bytes = boundary.output_message;
      l->output_gradient_message_bytes = boundary.gradient_message;
    }
    previous = nn::LayerSlot{{}, layer.index, layer.name};
  }
  // The loss in fp32, as the executor computes it, on zero class ids.
  if (model.loss && x.size() == 1 && x.front().defined() && x.front().dim() >= 1) {
    torch::Tensor y = x.front().to(torch::kFloat);
    std::vector<int64_t> shape(y.sizes().begin(), y.sizes().end() - 1);
    const torch::Tensor target = torch::zeros(shape, torch::kLong);
    const Call loss = [&](const nn::Tensors& input) {
      return nn::Tensors{model.loss(input.front(), target)};
    };
    memory.loss = measure_call(loss, {y}, Precision::Fp32);
  }
  return memory;
}

}  // namespace baton::runtime
