// The single-process replay of asynchronous 1F1B without a flush that the
// pipedream, async and pipemare tests hold the pipeline to (a four-Linear
// MLP, stage s of p on rank s): in that order stage s runs micro-batch j's
// forward after j - tau of its updates (tau = p - 1 - s), so on W_(j - tau),
// and its backward on the weights the rules say (Rules), and each backward
// is followed by the stage's update with that micro-batch's gradient.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/pipeline/reference_training.h"

namespace baton::test {
namespace async_replay {

constexpr int kSteps = 3;
constexpr int kMicrobatches = 4;
constexpr int kBatch = 12;
constexpr double kLr = 0.1;
const auto kTimeout = std::chrono::seconds(60);

using Params = std::map<std::string, torch::Tensor>;

inline std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  return test::seeded_batch(700 + step, kBatch);
}

struct Record {
  std::vector<double> losses;  // per step: the mini-batch's loss
  Params final_params;
};

// What the replay runs: the backward's weights (stashed: the forward's, as
// pipedream; corrected: extrapolated; neither: the latest, as async) and
// T1's warm-up in updates (0: none).
struct Rules {
  bool stash = false;
  bool correct = false;
  double decay = 0.5;
  int warmup_updates = 0;
};

// history[s][k]: stage s's parameters after k updates ("<child>.<name>").
using History = std::vector<std::vector<Params>>;

// The weights stage s of p runs micro-batch j's forward on: W_(j - tau).
inline const Params& forward_weights(const History& history, int pp, int s, int j) {
  return history[s].at(std::max(0, j - (pp - 1 - s)));
}

// The weights stage s runs micro-batch j's backward on, by the rules:
// stashed, the forward's; corrected, W_j - tau v_j; else the latest, W_j.
inline torch::Tensor backward_weights(const History& history, int pp, int s, int j,
                                      const std::string& key, const Rules& rules) {
  const int tau = pp - 1 - s;
  if (rules.stash) return forward_weights(history, pp, s, j).at(key);
  const torch::Tensor& w = history[s].at(j).at(key);
  if (!rules.correct || tau == 0) return w;
  const double g = std::pow(rules.decay, 1.0 / tau);
  torch::Tensor v = torch::zeros_like(w);
  for (int k = 0; k < j; ++k)
    v = g * v + (1 - g) * (history[s].at(k + 1).at(key) - history[s].at(k).at(key));
  return w - tau * v;
}

// The replay's model and its history: `stage_of_layer[i]` is the stage of
// child i of `model`.
struct Replayed {
  Replayed(torch::nn::Sequential m, std::vector<int> stages, int p)
      : model(std::move(m)), stage_of_layer(std::move(stages)), pp(p), history(p, {Params{}}) {
    for (const auto& item : model->named_parameters())
      history[stage_of(item.key())][0][item.key()] = item.value().detach().clone();
  }
  int stage_of(const std::string& key) const {
    return stage_of_layer.at(std::stoi(key.substr(0, key.find('.'))));
  }
  // Before micro-batch j: the model's parameters are the backward's weights.
  void load_backward_weights(int j, const Rules& rules) {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      item.value().copy_(backward_weights(history, pp, stage_of(item.key()), j, item.key(), rules));
      item.value().mutable_grad() = torch::Tensor();
    }
  }
  // Child i, a Linear, on h: x W_b^T + (x (W_f - W_b)^T).detach() has the
  // forward's value and the backward's gradients (g W_b for the input).
  torch::Tensor linear(size_t i, const torch::Tensor& h, int j) {
    auto* fc = model->ptr(i)->as<torch::nn::LinearImpl>();
    const Params& f = forward_weights(history, pp, stage_of_layer.at(i), j);
    return linear_of(*fc, std::to_string(i), h, f);
  }
  // The same for a Linear `fc` named "<prefix>.weight" and "<prefix>.bias".
  static torch::Tensor linear_of(torch::nn::LinearImpl& fc, const std::string& prefix,
                                 const torch::Tensor& h, const Params& f) {
    const std::string w = prefix + ".weight", b = prefix + ".bias";
    return torch::matmul(h, fc.weight.t()) +
           torch::matmul(h, (f.at(w) - fc.weight.detach()).t()).detach() + fc.bias +
           (f.at(b) - fc.bias.detach()).detach();
  }
  // After micro-batch j's backward: each stage's update with its gradient,
  // at lr times T1's factor.
  void update(int j, const Rules& rules) {
    for (int s = 0; s < pp; ++s) history[s].push_back(history[s].back());
    for (const auto& item : model->named_parameters()) {
      const int s = stage_of(item.key());
      const int tau = pp - 1 - s;
      const double factor =
          rules.warmup_updates == 0
              ? 1
              : std::pow(tau + 1.0,
                         -(1 - std::min(1.0, static_cast<double>(j) / rules.warmup_updates)));
      auto& next = history[s].back()[item.key()];
      next = next - kLr * factor * item.value().grad();
    }
  }
  // The replay's loop over kSteps steps of kMicrobatches micro-batches j:
  // `forward(t, k, j)` gives micro-batch k of step t's logits (on the
  // backward's weights, its Linears through linear()) and targets; its loss,
  // scaled by its share of the batch, runs backward, then every stage updates.
  Record train(
      const Rules& rules,
      const std::function<std::pair<torch::Tensor, torch::Tensor>(int, int, int)>& forward) {
    Record rec;
    int j = 0;
    for (int t = 0; t < kSteps; ++t) {
      double loss_sum = 0;
      for (int k = 0; k < kMicrobatches; ++k, ++j) {
        load_backward_weights(j, rules);
        const auto [logits, targets] = forward(t, k, j);
        const double share = static_cast<double>(logits.size(0)) / kBatch;
        torch::Tensor loss = test::cross_entropy(logits, targets) * share;
        loss.backward();
        loss_sum += loss.item<double>();
        update(j, rules);
      }
      rec.losses.push_back(loss_sum);
    }
    rec.final_params = final_params();
    return rec;
  }
  Params final_params() const {
    Params out;
    for (int s = 0; s < pp; ++s)
      for (const auto& [key, value] : history[s].back()) out["layer." + key] = value;
    return out;
  }

  torch::nn::Sequential model;
  std::vector<int> stage_of_layer;
  int pp;
  History history;
};

// The four-Linear MLP replayed; `stage_of_layer[i]`: the stage of child i.
inline Record replay(const std::vector<int>& stage_of_layer, int pp, const Rules& rules) {
  Replayed run(test::four_linear_mlp(), stage_of_layer, pp);
  return run.train(rules, [&](int t, int k, int j) {
    auto [x, y] = batch(t);
    torch::Tensor h = x.chunk(kMicrobatches)[k];
    size_t i = 0;
    for (auto it = run.model->begin(); it != run.model->end(); ++it, ++i)
      h = it->ptr()->as<torch::nn::LinearImpl>() ? run.linear(i, h, j) : it->forward(h);
    return std::make_pair(h, y.chunk(kMicrobatches)[k]);
  });
}

// Every rank's losses and final parameters equal the replay's; every
// parameter is on exactly one rank.
inline void expect_matches(const std::vector<Record>& ranks, const Record& want) {
  size_t seen = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const Record& got = ranks[r];
    for (int t = 0; t < kSteps; ++t)
      EXPECT_NEAR(got.losses[t], want.losses[t], 1e-5 * std::abs(want.losses[t]))
          << "rank " << r << " step " << t;
    for (const auto& [name, p] : got.final_params)
      test::expect_close(p, want.final_params.at(name), name);
    seen += got.final_params.size();
  }
  EXPECT_EQ(seen, want.final_params.size());
}

inline double distance(const Params& a, const Params& b) {
  double most = 0;
  for (const auto& [name, t] : a) most = std::max(most, test::relative_difference(t, b.at(name)));
  return most;
}

}  // namespace async_replay
}  // namespace baton::test
