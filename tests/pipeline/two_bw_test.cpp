// 2bw (PipeDream-2BW) through the façade, held to a single-process reference
// that applies the same staleness by hand: every micro-batch of step t runs on
// the weights at the start of step t, and the update after step t applies
// step t - 1's gradient (none after step 0; flush() leaves the last one).
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

using testing::HasSubstr;

constexpr int kSteps = 5;
constexpr int kMicrobatches = 4;
constexpr double kLr = 0.1;
const auto kTimeout = std::chrono::seconds(60);

using Params = std::map<std::string, torch::Tensor>;

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  return test::seeded_batch(500 + step, 12);
}

// What the reference and the pipeline record per step.
struct Record {
  std::vector<double> losses;
  std::vector<Params> grads;  // the gradients the optimizer applies after each step (empty: none)
  Params final_params;        // after the flush and its update
  torch::Tensor eval;         // the model's output for batch(0)'s inputs at the end
};

Params named(const torch::nn::Sequential& model, bool grads) {
  Params out;
  for (const auto& item : model->named_parameters()) {
    const torch::Tensor& t = grads ? item.value().grad() : item.value();
    if (t.defined()) out["layer." + item.key()] = t.detach().clone();
  }
  return out;
}

// One process: W(t+1) = W(t) - lr * g(t-1), g(t) the gradient of batch t on W(t).
Record reference() {
  torch::nn::Sequential model = test::four_linear_mlp();
  Record rec;
  Params previous_grad;
  auto apply = [&](const Params& g) {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters())
      item.value().sub_(kLr * g.at("layer." + item.key()));
  };
  for (int t = 0; t < kSteps; ++t) {
    auto [x, y] = batch(t);
    for (auto& p : model->parameters()) p.mutable_grad() = torch::Tensor();
    torch::Tensor loss = test::cross_entropy(model->forward(x), y);
    loss.backward();
    rec.losses.push_back(loss.item<double>());
    const Params grad = named(model, /*grads=*/true);
    rec.grads.push_back(previous_grad);
    if (!previous_grad.empty()) apply(previous_grad);
    previous_grad = grad;
  }
  rec.grads.push_back(previous_grad);  // what flush() leaves
  apply(previous_grad);
  rec.final_params = named(model, false);
  torch::NoGradGuard no_grad;
  rec.eval = model->forward(batch(0).first);
  return rec;
}

struct PipelineRun {
  std::vector<Record> ranks;
  std::vector<std::vector<int>> versions;  // per rank, per step (the flush last)
};

PipelineRun run_2bw(int pp) {
  at::set_num_threads(1);
  PipelineRun run;
  run.ranks.resize(pp);
  run.versions.resize(pp);
  std::vector<torch::nn::Sequential> models;
  for (int r = 0; r < pp; ++r) models.push_back(test::four_linear_mlp());
  comm::run_local_group(pp, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    Pipeline pipe(models[r], test::cross_entropy,
                  PipelineOptions().schedule("2bw").microbatches(kMicrobatches).communicator(comm));
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
    Record& rec = run.ranks[r];
    auto grads = [&] {
      Params out;
      for (auto& [name, p] : pipe.named_parameters())
        if (p.grad().defined()) out[name] = p.grad().detach().clone();
      return out;
    };
    for (int t = 0; t < kSteps; ++t) {
      auto [x, y] = batch(t);
      sgd.zero_grad();
      rec.losses.push_back(pipe.step(x, y));
      run.versions[r].push_back(pipe.last_step().weight_versions);
      rec.grads.push_back(grads());
      sgd.step();
    }
    run.versions[r].push_back(pipe.flush().weight_versions);
    rec.grads.push_back(grads());
    sgd.step();
    for (auto& [name, p] : pipe.named_parameters()) rec.final_params[name] = p.detach().clone();
    rec.eval = pipe.eval(batch(0).first);
  });
  return run;
}

using test::expect_close;

class TwoBw : public testing::TestWithParam<int> {};

TEST_P(TwoBw, EachUpdateAppliesThePreviousStepsGradientOnThatStepsWeights) {
  const int pp = GetParam();
  const Record want = reference();
  const PipelineRun run = run_2bw(pp);
  size_t seen_params = 0;
  for (int r = 0; r < pp; ++r) {
    const Record& got = run.ranks[r];
    ASSERT_EQ(got.losses.size(), want.losses.size());
    for (int t = 0; t < kSteps; ++t) {
      EXPECT_NEAR(got.losses[t], want.losses[t], 1e-5 * std::abs(want.losses[t]))
          << "rank " << r << " step " << t;
    }
    for (size_t t = 0; t < got.grads.size(); ++t) {
      if (want.grads[t].empty()) {
        EXPECT_TRUE(got.grads[t].empty()) << "rank " << r << ": a gradient after the first step";
        continue;
      }
      EXPECT_FALSE(got.grads[t].empty()) << "rank " << r << " update " << t;
      for (const auto& [name, g] : got.grads[t])
        expect_close(g, want.grads[t].at(name),
                     name + " gradient applied after step " + std::to_string(t));
    }
    for (const auto& [name, p] : got.final_params)
      expect_close(p, want.final_params.at(name), name);
    seen_params += got.final_params.size();
  }
  EXPECT_EQ(seen_params, want.final_params.size()) << "every parameter on exactly one rank";
  // The rank holding the last stage evaluates the masters' final weights.
  expect_close(run.ranks[pp - 1].eval, want.eval, "eval output");
}

// PipeDream-2BW keeps at most two weight versions per stage (measured as
// distinct parameter storages): rank r < p - 1 carries backwards into the
// next step and holds the stashed version while they run; the last rank
// carries nothing and holds one. The first step has nothing stashed yet.
TEST_P(TwoBw, HoldsAtMostTwoWeightVersions) {
  const int pp = GetParam();
  const PipelineRun run = run_2bw(pp);
  for (int r = 0; r < pp; ++r) {
    const auto& v = run.versions[r];
    ASSERT_EQ(v.size(), static_cast<size_t>(kSteps + 1));
    const int expected = r + 1 < pp ? 2 : 1;
    EXPECT_EQ(v[0], expected) << "rank " << r << " step 1 (it stashes at its end)";
    for (int t = 1; t <= kSteps; ++t)
      EXPECT_EQ(v[t], expected) << "rank " << r << " step " << t + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, TwoBw, testing::Values(2, 3),
                         [](const auto& info) { return "pp" + std::to_string(info.param); });

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(TwoBwErrors, FewerMicrobatchesThanStagesAndSavesAreRefused) {
  at::set_num_threads(1);
  std::vector<std::string> errors(2), saves(2);
  std::vector<torch::nn::Sequential> models{test::four_linear_mlp(), test::four_linear_mlp()};
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    errors[r] = error_of([&] {
      Pipeline(models[r], test::cross_entropy,
               PipelineOptions().schedule("2bw").microbatches(1).communicator(comm));
    });
    Pipeline pipe(models[r], test::cross_entropy,
                  PipelineOptions().schedule("2bw").microbatches(2).communicator(comm));
    saves[r] = error_of([&] { pipe.save(testing::TempDir() + "/two_bw_save"); });
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(errors[r], HasSubstr("2bw needs at least pp micro-batches")) << "rank " << r;
    EXPECT_THAT(saves[r], HasSubstr("save with schedule 2bw")) << "rank " << r;
  }
}

}  // namespace
}  // namespace baton
