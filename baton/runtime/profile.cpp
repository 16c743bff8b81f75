#include "baton/runtime/profile.h"

#include <torch/autograd.h>

#include <algorithm>
#include <chrono>

namespace baton::runtime {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::vector<partition::LayerCost> profile_layers(const nn::ModelSpec& model,
                                                 const torch::Tensor& sample, uint64_t seed,
                                                 int repeats, Precision precision) {
  return profile_layers(model, nn::Tensors{sample}, seed, repeats, precision);
}

std::vector<partition::LayerCost> profile_layers(const nn::ModelSpec& model,
                                                 const nn::Tensors& sample, uint64_t seed,
                                                 int repeats, Precision precision) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  std::vector<partition::LayerCost> costs;
  // Each layer runs several times: a stash replaces, a pop leaves the tensor.
  nn::SkipFrame skips(/*keep=*/true);
  nn::Tensors x = sample;
  nn::LayerSlot previous;
  for (int i = 0; i < model.num_layers(); ++i) {
    nn::LayerSlot layer{nn::build_layer(model, i, seed), i, model.layers[i].name};
    partition::LayerCost cost;
    for (const auto& p : layer.module.ptr()->parameters())
      cost.parameter_bytes += static_cast<double>(p.numel() * p.element_size());
    cost.activation_bytes = nn::bytes_of(x);
    std::vector<double> forward, backward;
    nn::Tensors out;
    for (int r = 0; r <= repeats; ++r) {
      nn::Tensors input;
      for (const auto& t : x)
        input.push_back(t.is_floating_point() ? t.detach().requires_grad_(true) : t);
      const auto t0 = Clock::now();
      // One step's autocast region per run: the weights' casts count, once.
      AutocastScope autocast(precision, torch::kCPU);
      out = nn::call_layer(layer, input, i > 0 ? &previous : nullptr);
      const auto t1 = Clock::now();
      std::vector<torch::Tensor> roots, seeds;
      for (const auto& y : out) {
        if (y.defined() && y.requires_grad()) {
          roots.push_back(y);
          seeds.push_back(torch::ones_like(y));
        }
      }
      if (!roots.empty()) torch::autograd::backward(roots, seeds);
      const auto t2 = Clock::now();
      if (r > 0) {
        forward.push_back(ms(t0, t1));
        backward.push_back(ms(t1, t2));
      }
    }
    cost.forward_time = median(forward);
    cost.backward_time = median(backward);
    cost.output_bytes = nn::bytes_of(out);
    costs.push_back(cost);
    x.clear();
    for (const auto& y : out) x.push_back(y.detach());
    previous = nn::LayerSlot{{}, layer.index, layer.name};
  }
  return costs;
}

}  // namespace baton::runtime
