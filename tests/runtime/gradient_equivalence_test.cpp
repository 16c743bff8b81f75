// Every schedule trains exactly like one device: after 3 SGD steps on the same
// batches, each parameter equals single-process training of the same model on
// the whole mini-batch within 1e-5 relative (float32; 2bw, pipedream, async
// and pipemare: with their staleness (and pipemare's learning-rate warm-up and
// corrected backward weights) replayed by hand, then their drain; on this
// small model stashing or not changes the result by less than 1e-5, which
// tests/pipeline/pipedream_test.cpp tells apart), for every schedule,
// p in {1, 2, 4}, m in {1, 2, 3, 8} (where the schedule is defined) and every
// recomputation mode. Ranks run as threads over one c10d HashStore, their
// point-to-point through shared memory (the default for ranks of one host);
// a second pass sends it over Gloo instead, for every schedule at p in {2, 4}
// and m = 8 without recomputation (the transports carry tensors, not
// recomputation modes).
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/optim.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <thread>

#include "baton/comm/communicator.h"
#include "baton/comm/rank_layout.h"
#include "baton/core/error.h"
#include "baton/nn/models.h"
#include "baton/partition/balance.h"
#include "baton/runtime/executor.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/pipemare.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/tied_reduction.h"

namespace baton::runtime {
namespace {

constexpr int kSteps = 3;
constexpr int kBatch = 26;  // uneven micro-batches for m = 3 and m = 8
constexpr uint64_t kSeed = 7;
constexpr double kLr = 0.1;

nn::ModelSpec small_mlp() {
  return nn::mlp(/*layers=*/8, /*hidden=*/16, /*in=*/8, /*classes=*/4);
}

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(1000 + step);
  torch::Tensor x = torch::randn({kBatch, 8}, gen);
  torch::Tensor y = torch::randint(0, 4, {kBatch}, gen, torch::kLong);
  return {x, y};
}

// Single-device reference: parameters by name ("3.weight") after kSteps steps.
// `one_update_stale` (2bw, a schedule without a flush): the update after step
// t applies step t - 1's gradient, and a last update applies step kSteps - 1's
// (what Executor::drain() leaves): W(t+1) = W(t) - lr * grad(W(t-1)).
std::map<std::string, torch::Tensor> train_single_device(bool one_update_stale) {
  const nn::ModelSpec model = small_mlp();
  torch::nn::Sequential seq = nn::build_sequential(model, kSeed);
  torch::optim::SGD opt(seq->parameters(), torch::optim::SGDOptions(kLr));
  std::vector<torch::Tensor> previous;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    opt.zero_grad();
    model.loss(seq->forward(x), y).backward();
    if (one_update_stale) {
      std::vector<torch::Tensor> grads;
      for (auto& p : seq->parameters()) grads.push_back(p.grad().clone());
      for (size_t i = 0; i < previous.size(); ++i)
        seq->parameters()[i].mutable_grad() = previous[i];
      if (!previous.empty()) opt.step();
      previous = grads;
      continue;
    }
    opt.step();
  }
  if (one_update_stale) {
    for (size_t i = 0; i < previous.size(); ++i) seq->parameters()[i].mutable_grad() = previous[i];
    opt.step();
  }
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : seq->named_parameters()) out[item.key()] = item.value().detach().clone();
  return out;
}

// history[s][k]: stage s's parameters ("3.0.weight") after k updates.
using History = std::vector<std::vector<std::map<std::string, torch::Tensor>>>;

// The stage holding parameter "3.0.weight" (layer 3).
int stage_of_parameter(const partition::Partition& part, const std::string& key) {
  return part.stage_of_layer(std::stoi(key.substr(0, key.find('.'))));
}

// Every stage's parameters before any update.
History initial_history(const torch::nn::Sequential& seq, int p, const partition::Partition& part) {
  History history(p, std::vector<std::map<std::string, torch::Tensor>>(1));
  for (const auto& item : seq->named_parameters())
    history[stage_of_parameter(part, item.key())][0][item.key()] = item.value().detach().clone();
  return history;
}

using Params = std::map<std::string, torch::Tensor>;

// The gradients micro-batch j (over all steps) gives every parameter, from
// its inputs, its loss scale and the history so far.
using MicrobatchGradients = std::function<Params(
    int j, const torch::Tensor& x, const torch::Tensor& y, double scale, const History& history)>;

// The factor on lr of stage s's update k (0-based); 1 but for pipemare.
using LrFactor = std::function<double(int s, int k)>;

// A schedule that updates after every backward, replayed on one device: over
// all steps' micro-batches j in order, each stage's (j + 1)-th parameters are
// its j-th less lr (times `lr_factor`) times micro-batch j's gradient (its
// share of the mini-batch's mean loss). Returns the parameters after the last
// update.
Params replay_per_microbatch(
    int p, int m, const partition::Partition& part, const MicrobatchGradients& gradients,
    const LrFactor& lr_factor = [](int, int) { return 1.0; }) {
  History history = initial_history(nn::build_sequential(small_mlp(), kSeed), p, part);
  int j = 0;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    const auto xs = split_microbatches(x, m), ys = split_microbatches(y, m);
    const auto scales = loss_scales(ys);
    for (int k = 0; k < m; ++k, ++j) {
      const Params grads = gradients(j, xs[k], ys[k], scales[k], history);
      for (int s = 0; s < p; ++s) history[s].push_back(history[s].back());
      for (const auto& [name, grad] : grads) {
        const int s = stage_of_parameter(part, name);
        auto& next = history[s].back()[name];
        next = next - kLr * lr_factor(s, j) * grad;
      }
    }
  }
  Params out;
  for (int s = 0; s < p; ++s)
    for (const auto& [key, value] : history[s].back()) out[key] = value;
  return out;
}

// pipedream (weight stashing): stage s of p runs micro-batch j's forward and
// backward on its weights after max(0, j - (p - 1 - s)) updates (1F1B
// without a flush).
Params train_single_device_pipedream(int p, int m, const partition::Partition& part) {
  const nn::ModelSpec model = small_mlp();
  torch::nn::Sequential seq = nn::build_sequential(model, kSeed);
  return replay_per_microbatch(
      p, m, part,
      [&](int j, const torch::Tensor& x, const torch::Tensor& y, double scale,
          const History& history) {
        {
          torch::NoGradGuard no_grad;
          for (auto& item : seq->named_parameters()) {
            const int s = stage_of_parameter(part, item.key());
            item.value().copy_(history[s].at(std::max(0, j - (p - 1 - s))).at(item.key()));
            item.value().mutable_grad() = torch::Tensor();
          }
        }
        (model.loss(seq->forward(x), y) * scale).backward();
        Params grads;
        for (const auto& item : seq->named_parameters()) grads[item.key()] = item.value().grad();
        return grads;
      });
}

// The backward's weights of a parameter ("3.0.weight") of stage s for
// micro-batch j, from the history so far.
using BackwardWeight =
    std::function<torch::Tensor(int s, int j, const std::string& name, const History& history)>;

// A schedule without stashing (async, pipemare): micro-batch j's forward on
// stage s ran on its weights after max(0, j - (p - 1 - s)) updates, its
// backward on `backward_weight`. Replayed layer by layer on small_mlp's
// Linear(+ReLU) layers with a straight-through product:
// x W_b^T + (x (W_f - W_b)^T).detach() has the forward's value and the
// backward's gradients, g W_b for the input and g^T x for the weight.
Params replay_unstashed(int p, int m, const partition::Partition& part,
                        const BackwardWeight& backward_weight, const LrFactor& lr_factor) {
  const nn::ModelSpec model = small_mlp();
  const int L = model.num_layers();
  return replay_per_microbatch(
      p, m, part,
      [&](int j, const torch::Tensor& x, const torch::Tensor& y, double scale,
          const History& history) {
        torch::Tensor h = x;
        Params leaves;  // the backward's weights, by name
        for (int i = 0; i < L; ++i) {
          const int s = part.stage_of_layer(i);
          const auto& f = history[s].at(std::max(0, j - (p - 1 - s)));
          const std::string w = std::to_string(i) + ".0.weight",
                            bias = std::to_string(i) + ".0.bias";
          const torch::Tensor b_w = backward_weight(s, j, w, history),
                              b_bias = backward_weight(s, j, bias, history);
          torch::Tensor wb = b_w.clone().requires_grad_(true),
                        bb = b_bias.clone().requires_grad_(true);
          leaves[w] = wb;
          leaves[bias] = bb;
          h = torch::matmul(h, wb.t()) + torch::matmul(h, (f.at(w) - b_w).t()).detach() + bb +
              (f.at(bias) - b_bias).detach();
          if (i + 1 < L) h = torch::relu(h);
        }
        (model.loss(h, y) * scale).backward();
        Params grads;
        for (const auto& [name, leaf] : leaves) grads[name] = leaf.grad();
        return grads;
      },
      lr_factor);
}

// async: micro-batch j's backward on stage s runs on the weights as they are
// then, after j updates (its backwards of 0 .. j - 1).
Params train_single_device_async(int p, int m, const partition::Partition& part) {
  return replay_unstashed(
      p, m, part,
      [](int s, int j, const std::string& name, const History& history) {
        return history[s].at(j).at(name);
      },
      [](int, int) { return 1.0; });
}

// pipemare with its default options (runtime/pipemare.h), written out here
// from the paper's rules: stage s's delay is tau = p - 1 - s; its update k
// runs at lr (tau + 1)^-(1 - min(1, k / (warm-up steps x m))); micro-batch
// j's backward runs on W_j - tau v_j, W_j its weights after j updates and
// v_j the velocity after them, v_{k+1} = g v_k + (1 - g)(W_{k+1} - W_k),
// g = D^(1 / tau), v_0 = 0.
Params train_single_device_pipemare(int p, int m, const partition::Partition& part) {
  const PipeMareOptions defaults;
  const double warmup = static_cast<double>(defaults.warmup_steps()) * m;
  return replay_unstashed(
      p, m, part,
      [&](int s, int j, const std::string& name, const History& history) {
        const int tau = p - 1 - s;
        const torch::Tensor& w = history[s].at(j).at(name);
        if (tau == 0) return w;
        const double g = std::pow(defaults.decay(), 1.0 / tau);
        torch::Tensor v = torch::zeros_like(w);
        for (int k = 0; k < j; ++k)
          v = g * v + (1 - g) * (history[s].at(k + 1).at(name) - history[s].at(k).at(name));
        return w - tau * v;
      },
      [&](int s, int k) {
        const int tau = p - 1 - s;
        return std::pow(tau + 1.0, -(1 - std::min(1.0, k / warmup)));
      });
}

struct Case {
  std::string schedule;
  int p, m;
  Recompute recompute;
  comm::TransportKind transport = comm::TransportKind::kAuto;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.schedule << " p=" << c.p << " m=" << c.m << " recompute=" << to_string(c.recompute)
       << " transport=" << comm::to_string(c.transport);
}

std::string name_of(const testing::TestParamInfo<Case>& info) {
  std::string n = info.param.schedule + "_p" + std::to_string(info.param.p) + "_m" +
                  std::to_string(info.param.m) + "_" + std::string(to_string(info.param.recompute));
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

// Every schedule at the (p, m) where it is defined, with `recomputes` over `transport`.
std::vector<Case> defined_cases(const std::vector<int>& ps, const std::vector<int>& ms,
                                const std::vector<Recompute>& recomputes,
                                comm::TransportKind transport) {
  std::vector<Case> cases;
  for (const auto& name : schedule::schedule_names()) {
    for (int p : ps) {
      for (int m : ms) {
        try {
          const auto s = schedule::generate(
              name, schedule::GeneratorOptions{}.set_ranks(p).set_microbatches(m));
          if (s.stages > small_mlp().num_layers()) continue;
        } catch (const Error&) {
          continue;  // not defined for (p, m): the generator says why elsewhere
        }
        for (Recompute c : recomputes) cases.push_back({name, p, m, c, transport});
      }
    }
  }
  return cases;
}

class GradientEquivalence : public testing::TestWithParam<Case> {};

TEST_P(GradientEquivalence, ParametersAfterThreeStepsMatchSingleDeviceTraining) {
  at::set_num_threads(1);
  const Case& c = GetParam();
  const nn::ModelSpec model = small_mlp();
  // Chimera's replicated stages sum their copies' gradients (REDUCE_TIED).
  const schedule::Schedule lowered =
      schedule::add_tied_reductions(schedule::lower(schedule::generate(
          c.schedule, schedule::GeneratorOptions{}.set_ranks(c.p).set_microbatches(c.m))));
  static const std::map<std::string, torch::Tensor> flushed = train_single_device(false);
  static const std::map<std::string, torch::Tensor> stale = train_single_device(true);
  const schedule::Placement placement(lowered);
  const partition::Partition part = partition::uniform(model.num_layers(), lowered.stages);
  const bool per_microbatch =
      c.schedule == "pipedream" || c.schedule == "async" || c.schedule == "pipemare";
  const std::map<std::string, torch::Tensor> reference =
      c.schedule == "pipedream"  ? train_single_device_pipedream(c.p, c.m, part)
      : c.schedule == "async"    ? train_single_device_async(c.p, c.m, part)
      : c.schedule == "pipemare" ? train_single_device_pipemare(c.p, c.m, part)
      : lowered.carries          ? stale
                                 : flushed;
  auto store = comm::make_hash_store();

  std::vector<std::map<std::string, torch::Tensor>> results(c.p);
  std::vector<std::string> errors(c.p);
  std::vector<std::thread> ranks;
  for (int r = 0; r < c.p; ++r) {
    ranks.emplace_back([&, r] {
      try {
        std::optional<comm::Communicator> communicator;
        if (c.p > 1) {
          communicator.emplace(
              comm::from_store(store, r, c.p, std::chrono::seconds(20), c.transport));
          // Threads of one process share a host: auto picks shared memory.
          const std::string expected = c.transport == comm::TransportKind::kGloo ? "gloo" : "shm";
          for (int peer = 0; peer < c.p; ++peer) {
            BATON_CHECK(peer == r || communicator->transport_name(peer) == expected, "rank ", r,
                        " reaches rank ", peer, " over ", communicator->transport_name(peer),
                        ", expected ", expected);
          }
        }
        ExecutorOptions options;
        options.recompute = c.recompute;
        const comm::RankLayout layout =
            comm::make_rank_layout(communicator ? comm::borrow(*communicator) : comm::solo(),
                                   topology::Topology(1, c.p, 1));
        Executor executor(lowered, layout,
                          build_stages(model, part, placement.stages_of_rank(r), kSeed), model.loss,
                          options);
        torch::optim::SGD opt(executor.parameters(), torch::optim::SGDOptions(kLr));
        // pipedream, async and pipemare step the optimizer themselves, after
        // every backward (pipemare's warm-up scaling its lr).
        if (per_microbatch) {
          executor.set_update([&opt](double lr_scale) {
            for (auto& group : opt.param_groups()) group.options().set_lr(kLr * lr_scale);
            opt.step();
          });
        }
        for (int step = 0; step < kSteps; ++step) {
          auto [x, y] = batch(step);
          opt.zero_grad();
          executor.run_step(x, y);
          if (!per_microbatch) opt.step();
        }
        if (lowered.carries) {  // the last step's carried backwards, then its update
          executor.drain();
          if (!per_microbatch) opt.step();
        }
        // The optimizer's tensors (without a flush, the masters), by name.
        const std::vector<torch::Tensor> stepped = executor.parameters();
        size_t k = 0;
        for (const auto& [s, stage] : executor.stages())
          for (const auto& item : stage->module().named_parameters())
            results[r][item.key()] = stepped.at(k++).detach().clone();
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < c.p; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;

  std::map<std::string, int> seen;
  for (int r = 0; r < c.p; ++r) {
    for (const auto& [name, value] : results[r]) {
      ++seen[name];
      ASSERT_TRUE(reference.count(name)) << name;
      const torch::Tensor& expected = reference.at(name);
      const double rel = (value - expected).norm().item<double>() /
                         std::max(1e-12, expected.norm().item<double>());
      EXPECT_LE(rel, 1e-5) << name << " on rank " << r;
    }
  }
  // Every layer's parameters were trained somewhere (Chimera: on two ranks).
  EXPECT_EQ(seen.size(), reference.size());
}

INSTANTIATE_TEST_SUITE_P(EverySchedule, GradientEquivalence,
                         testing::ValuesIn(defined_cases({1, 2, 4}, {1, 2, 3, 8},
                                                         {Recompute::Never, Recompute::ExceptLast,
                                                          Recompute::Always},
                                                         comm::TransportKind::kAuto)),
                         name_of);
INSTANTIATE_TEST_SUITE_P(EveryScheduleOverGloo, GradientEquivalence,
                         testing::ValuesIn(defined_cases({2, 4}, {8}, {Recompute::Never},
                                                         comm::TransportKind::kGloo)),
                         name_of);

}  // namespace
}  // namespace baton::runtime
