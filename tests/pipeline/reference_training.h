// What the façade tests share: a classification loss, seeded batches of 8
// features and 4 classes, and the single-process reference they are held to
// (the whole mini-batch, plain LibTorch, SGD).
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace baton::test {

inline torch::Tensor cross_entropy(const torch::Tensor& output, const torch::Tensor& target) {
  return torch::nn::functional::cross_entropy(output, target);
}

// `rows` samples of 8 features and labels in [0, 4), drawn from `seed`.
inline std::pair<torch::Tensor, torch::Tensor> seeded_batch(uint64_t seed, int64_t rows) {
  torch::Generator gen = at::detail::createCPUGenerator(seed);
  return {torch::randn({rows, 8}, gen), torch::randint(0, 4, {rows}, gen, torch::kLong)};
}

// Seeded 8 -> 16 -> 16 -> 16 -> 4 MLP of four Linear layers, seven children
// (parameters in bytes, fp32: 512 + 64, 1024 + 64, 1024 + 64, 256 + 16).
inline torch::nn::Sequential four_linear_mlp() {
  torch::manual_seed(0);
  return torch::nn::Sequential(
      torch::nn::Linear(8, 16), torch::nn::ReLU(), torch::nn::Linear(16, 16), torch::nn::Tanh(),
      torch::nn::Linear(16, 16), torch::nn::ReLU(), torch::nn::Linear(16, 4));
}

struct TrainingRun {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> parameters;  // "layer.<name>", as Pipeline names them
};

// `model` trained alone for `steps` SGD steps of rate `lr` on batch_of(step).
inline TrainingRun train_one_process(
    torch::nn::Sequential model, int steps, double lr,
    const std::function<std::pair<torch::Tensor, torch::Tensor>(int)>& batch_of) {
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(lr));
  TrainingRun run;
  for (int step = 0; step < steps; ++step) {
    auto [x, y] = batch_of(step);
    sgd.zero_grad();
    torch::Tensor loss = cross_entropy(model->forward(x), y);
    loss.backward();
    sgd.step();
    run.losses.push_back(loss.item<double>());
  }
  for (const auto& item : model->named_parameters()) {
    run.parameters["layer." + item.key()] = item.value().detach().clone();
  }
  return run;
}

// 2bw's update replayed by hand: each step() applies the gradients the
// parameters held at the step before, W(t+1) = W(t) - lr grad(W(t-1)); drain()
// applies the last ones, as the pipeline's flush() and one more optimizer step.
class StaleSgd {
 public:
  StaleSgd(std::vector<torch::Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {}
  void step() {
    std::vector<torch::Tensor> grads;
    for (const auto& p : params_) grads.push_back(p.grad().clone());
    if (!previous_.empty()) apply(previous_);
    previous_ = std::move(grads);
  }
  void drain() { apply(previous_); }

 private:
  void apply(const std::vector<torch::Tensor>& grads) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) params_[i].sub_(grads[i] * lr_);
  }
  std::vector<torch::Tensor> params_;
  double lr_;
  std::vector<torch::Tensor> previous_;
};

inline double relative(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(1e-12, b.norm().item<double>());
}

// The largest difference between `got` and `want`, relative to want's largest
// magnitude (1e-6 at least).
inline double relative_difference(const torch::Tensor& got, const torch::Tensor& want) {
  return (got - want).abs().max().item<double>() / std::max(1e-6, want.abs().max().item<double>());
}

// `got` equals `want` within 1e-5 relative (float32 sums in another order).
inline void expect_close(const torch::Tensor& got, const torch::Tensor& want,
                         const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_LE(relative_difference(got, want), 1e-5) << what;
}

}  // namespace baton::test
