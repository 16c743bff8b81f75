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

double bytes_of(const torch::Tensor& t) {
  return static_cast<double>(t.numel() * t.element_size());
}

}  // namespace

std::vector<partition::LayerCost> profile_layers(const nn::ModelSpec& model,
                                                 const torch::Tensor& sample, uint64_t seed,
                                                 int repeats) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  std::vector<partition::LayerCost> costs;
  torch::Tensor x = sample;
  for (int i = 0; i < model.num_layers(); ++i) {
    torch::nn::AnyModule layer = nn::build_layer(model, i, seed);
    partition::LayerCost cost;
    for (const auto& p : layer.ptr()->parameters()) cost.parameter_bytes += bytes_of(p);
    cost.activation_bytes = bytes_of(x);
    std::vector<double> forward, backward;
    torch::Tensor out;
    for (int r = 0; r <= repeats; ++r) {
      torch::Tensor input = x.is_floating_point() ? x.detach().requires_grad_(true) : x;
      const auto t0 = Clock::now();
      out = layer.forward(input);
      const auto t1 = Clock::now();
      torch::autograd::backward({out}, {torch::ones_like(out)});
      const auto t2 = Clock::now();
      if (r > 0) {
        forward.push_back(ms(t0, t1));
        backward.push_back(ms(t1, t2));
      }
    }
    cost.forward_time = median(forward);
    cost.backward_time = median(backward);
    cost.output_bytes = bytes_of(out);
    costs.push_back(cost);
    x = out.detach();
  }
  return costs;
}

}  // namespace baton::runtime
