#include "baton/runtime/pipemare.h"

#include <algorithm>
#include <cmath>

#include "baton/core/error.h"

namespace baton::runtime {

void check_pipemare_options(const PipeMareOptions& options) {
  BATON_CHECK(options.warmup_steps() >= 0,
              "[pipemare] warmup_steps must be at least 0 (0: no learning-rate warm-up), got ",
              options.warmup_steps());
  BATON_CHECK(std::isfinite(options.decay()) && options.decay() >= 0 && options.decay() < 1,
              "[pipemare] decay must be in [0, 1), got ", options.decay());
}

double pipemare_lr_factor(int delay, int64_t update, int64_t warmup_updates) {
  if (delay <= 0 || warmup_updates <= 0 || update >= warmup_updates) return 1;
  const double progress = static_cast<double>(update) / static_cast<double>(warmup_updates);
  return std::pow(static_cast<double>(delay) + 1, -(1 - progress));
}

double pipemare_velocity_decay(double decay, int delay) {
  BATON_ASSERT(delay >= 1, "a velocity decay for delay ", delay);
  return std::pow(decay, 1.0 / delay);
}

PipeMareStage::PipeMareStage(std::vector<torch::Tensor> masters, int delay, int64_t warmup_updates,
                             const PipeMareOptions& options)
    : masters_(std::move(masters)), delay_(delay), warmup_updates_(warmup_updates) {
  check_pipemare_options(options);
  if (!options.correction() || delay_ <= 0) return;
  gamma_ = pipemare_velocity_decay(options.decay(), delay_);
  torch::NoGradGuard no_grad;
  for (const auto& m : masters_) {
    compute_.push_back(m.detach().clone());
    average_.push_back(m.detach().clone());  // no velocity yet
  }
}

const std::vector<torch::Tensor>& PipeMareStage::forward_weights() {
  BATON_ASSERT(corrects(), "forward weights of a stage without correction");
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < masters_.size(); ++i) compute_[i].copy_(masters_[i].detach());
  return compute_;
}

namespace {

// out = w - c (w - a) and a = g a + (1 - g) w, in one pass over w and a.
void extrapolate_and_average(torch::Tensor& out, const torch::Tensor& w, torch::Tensor& a, double c,
                             double g) {
  const bool plain = w.device().is_cpu() && w.scalar_type() == torch::kFloat && w.is_contiguous() &&
                     a.is_contiguous() && out.is_contiguous();
  if (!plain) {
    at::mul_out(out, w, 1 - c).add_(a, c);
    a.mul_(g).add_(w, 1 - g);
    return;
  }
  const float* wp = w.data_ptr<float>();
  float* ap = a.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float cf = static_cast<float>(c), gf = static_cast<float>(g);
  const int64_t n = w.numel();
  for (int64_t k = 0; k < n; ++k) {
    const float wk = wp[k], ak = ap[k];
    op[k] = wk - cf * (wk - ak);
    ap[k] = gf * ak + (1 - gf) * wk;
  }
}

}  // namespace

const std::vector<torch::Tensor>& PipeMareStage::backward_weights() {
  BATON_ASSERT(corrects(), "backward weights of a stage without correction");
  torch::NoGradGuard no_grad;
  // v = (1 - g)(w - a): compute = w - delay v, then fold w into a for the
  // update that follows (w does not change in between).
  for (size_t i = 0; i < masters_.size(); ++i)
    extrapolate_and_average(compute_[i], masters_[i].detach(), average_[i], delay_ * (1 - gamma_),
                            gamma_);
  return compute_;
}

double PipeMareStage::begin_update() const {
  return pipemare_lr_factor(delay_, updates_, warmup_updates_);
}

void PipeMareStage::end_update() {
  ++updates_;
}

std::vector<torch::Tensor> PipeMareStage::velocity() const {
  std::vector<torch::Tensor> out;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < average_.size(); ++i)
    out.push_back((1 - gamma_) * (masters_[i].detach() - average_[i]));
  return out;
}

}  // namespace baton::runtime
