// baton::Pipeline, the façade: a user's Sequential trained pipeline-parallel
// on 2 ranks (threads over one store) takes the steps one process takes; the
// façade and `baton train` give the same losses for one configuration; bad
// input gets a baton::Error naming the parameter and the value.
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "baton/baton.h"
#include "baton/comm/launcher.h"
#include "baton/comm/local_group.h"
#include "baton/train/data_source.h"
#include "baton/train/trainer.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

using testing::HasSubstr;

constexpr int kSteps = 3;
constexpr int kBatch = 12;
constexpr double kLr = 0.1;
const auto kTimeout = std::chrono::seconds(30);

torch::nn::Sequential make_sequential() {
  torch::manual_seed(0);
  return torch::nn::Sequential(torch::nn::Linear(8, 16), torch::nn::ReLU(),
                               torch::nn::Linear(16, 16), torch::nn::Tanh(),
                               torch::nn::Linear(16, 4));
}

const auto loss_fn = &test::cross_entropy;
using test::relative;

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  return test::seeded_batch(100 + step, kBatch);
}

using TrainingRun = test::TrainingRun;

// The reference: the same Sequential on one process, no pipeline.
test::TrainingRun train_one_process() {
  return test::train_one_process(make_sequential(), kSteps, kLr, batch);
}

class SequentialOnTwoRanks : public testing::TestWithParam<std::string> {};

TEST_P(SequentialOnTwoRanks, TakesTheSameStepsAsOneProcess) {
  at::set_num_threads(1);
  const TrainingRun reference = train_one_process();
  // Each rank builds the user's model the same way (here, before the threads,
  // since torch's seed is global).
  std::vector<torch::nn::Sequential> models{make_sequential(), make_sequential()};
  std::vector<TrainingRun> runs(2);
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    PipelineOptions options =
        PipelineOptions().schedule(GetParam()).microbatches(4).communicator(comm);
    // zb-auto searches with the layers' costs, profiled on one micro-batch.
    if (GetParam() == "zb-auto") options.sample(batch(0).first.narrow(0, 0, kBatch / 4));
    Pipeline pipe(models[r], loss_fn, options);
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = batch(step);
      sgd.zero_grad();
      runs[r].losses.push_back(pipe.step(x, y));
      sgd.step();
    }
    for (auto& [name, value] : pipe.named_parameters())
      runs[r].parameters[name] = value.detach().clone();
  });
  for (int r = 0; r < 2; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << "rank " << r << " step " << step;
    }
  }
  std::map<std::string, int> seen;
  for (int r = 0; r < 2; ++r) {
    for (const auto& [name, value] : runs[r].parameters) {
      ++seen[name];
      ASSERT_TRUE(reference.parameters.count(name)) << name;
      EXPECT_LT(relative(value, reference.parameters.at(name)), 1e-5) << name << " on rank " << r;
    }
  }
  EXPECT_EQ(seen.size(), reference.parameters.size());
}

INSTANTIATE_TEST_SUITE_P(Schedules, SequentialOnTwoRanks,
                         testing::Values("1f1b", "gpipe", "interleaved", "zb-h1", "zb-h2", "zb-v",
                                         "chimera", "zb-auto"),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

TEST(Pipeline, LazyModelSpecBalancedByParamsOnTwoRanksTakesTheStepsOfOneDevice) {
  at::set_num_threads(1);
  const nn::ModelSpec spec = nn::mlp(/*layers=*/6, /*hidden=*/16, /*in=*/8, /*classes=*/4);
  constexpr uint64_t kSeed = 11;
  // One device: the same layers, built whole with the same seed.
  torch::nn::Sequential whole = nn::build_sequential(spec, kSeed);
  torch::optim::SGD reference_sgd(whole->parameters(), torch::optim::SGDOptions(kLr));
  std::vector<double> reference_losses;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    reference_sgd.zero_grad();
    torch::Tensor loss = spec.loss(whole->forward(x), y);
    loss.backward();
    reference_sgd.step();
    reference_losses.push_back(loss.item<double>());
  }
  std::map<std::string, torch::Tensor> reference;
  for (const auto& item : whole->named_parameters())
    reference["layer." + item.key()] = item.value();

  std::vector<TrainingRun> runs(2);
  std::vector<std::string> cuts(2);
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    Pipeline pipe(spec, {},
                  PipelineOptions()
                      .microbatches(3)
                      .balance("params")
                      .sample(batch(0).first.narrow(0, 0, 4))
                      .seed(kSeed)
                      .communicator(comm));
    cuts[r] = pipe.partition().to_string();
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = batch(step);
      sgd.zero_grad();
      runs[r].losses.push_back(pipe.step(x, y));
      sgd.step();
    }
    for (auto& [name, value] : pipe.named_parameters())
      runs[r].parameters[name] = value.detach().clone();
  });
  EXPECT_EQ(cuts[0], cuts[1]) << "both ranks cut the model the same way";
  size_t seen = 0;
  for (int r = 0; r < 2; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference_losses[step],
                  1e-5 * std::abs(reference_losses[step]));
    }
    for (const auto& [name, value] : runs[r].parameters) {
      ASSERT_TRUE(reference.count(name)) << name;
      EXPECT_LT(relative(value, reference.at(name)), 1e-5) << name;
      ++seen;
    }
  }
  EXPECT_EQ(seen, reference.size());
}

TEST(Pipeline, NamesParametersByGlobalLayerAndEvaluatesOnTheLastStage) {
  at::set_num_threads(1);
  torch::nn::Sequential reference = make_sequential();
  const torch::Tensor x = batch(0).first;
  const torch::Tensor expected = reference->forward(x).detach();
  std::vector<torch::nn::Sequential> models{make_sequential(), make_sequential()};
  std::vector<std::vector<std::string>> names(2);
  std::vector<std::vector<std::pair<int, std::vector<int>>>> layers(2);
  std::vector<torch::Tensor> outputs(2);
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    const int r = comm.rank();
    Pipeline pipe(models[r], loss_fn, PipelineOptions().microbatches(3).communicator(comm));
    EXPECT_EQ(pipe.rank(), r);
    for (auto& [name, value] : pipe.named_parameters()) names[r].push_back(name);
    layers[r] = pipe.stage_layers();
    outputs[r] = pipe.eval(x);
  });
  // 5 layers on 2 stages, uniformly: 3 and 2; ReLU and Tanh have no parameters.
  EXPECT_THAT(names[0], testing::ElementsAre("layer.0.weight", "layer.0.bias", "layer.2.weight",
                                             "layer.2.bias"));
  EXPECT_THAT(names[1], testing::ElementsAre("layer.4.weight", "layer.4.bias"));
  using Layers = std::vector<std::pair<int, std::vector<int>>>;
  EXPECT_EQ(layers[0], (Layers{{0, {0, 1, 2}}}));
  EXPECT_EQ(layers[1], (Layers{{1, {3, 4}}}));
  EXPECT_FALSE(outputs[0].defined());
  ASSERT_TRUE(outputs[1].defined());
  EXPECT_LT(relative(outputs[1], expected), 1e-6);
}

TEST(Pipeline, GivesTheSameLossesAsBatonTrainForOneConfiguration) {
  at::set_num_threads(1);
  const std::string metrics = testing::TempDir() + "pipeline_test_metrics.jsonl";
  train::TrainConfig c;
  c.model = "mlp";
  c.layers = 4;
  c.hidden = 16;
  c.in_features = 8;
  c.classes = 4;
  c.pp = 2;
  c.microbatches = 2;
  c.batch = 8;
  c.steps = kSteps;
  c.lr = 0.01;
  c.optimizer = Optimizer::Adam;
  c.threads = 1;
  c.metrics = metrics;
  // `baton train`, its two ranks as threads over a TCP store.
  const int port = comm::find_free_port();
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(2);
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      try {
        train::train(c, comm::RankEnv{r, 2, r, 2, "127.0.0.1", port});
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_EQ(errors[0] + errors[1], "");
  std::vector<double> trained;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto json = nlohmann::json::parse(line);
    if (!json.contains("final")) trained.push_back(json["loss"].get<double>());
  }
  std::remove(metrics.c_str());
  ASSERT_EQ(trained.size(), static_cast<size_t>(kSteps));

  // The façade by hand: the zoo's model, the same data, Adam.
  std::vector<std::vector<double>> losses(2);
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    Pipeline pipe(nn::mlp(c.layers, c.hidden, c.in_features, c.classes), {},
                  PipelineOptions().microbatches(c.microbatches).seed(c.seed).communicator(comm));
    auto data = train::make_data_source(c);
    torch::optim::Adam adam(pipe.parameters(), torch::optim::AdamOptions(c.lr));
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = data->batch(step);
      adam.zero_grad();
      losses[comm.rank()].push_back(pipe.step(x, y));
      adam.step();
    }
  });
  for (int step = 0; step < kSteps; ++step) {
    EXPECT_NEAR(losses[0][step], trained[step], 1e-6 * std::abs(trained[step])) << "step " << step;
    EXPECT_EQ(losses[0][step], losses[1][step]) << "every rank gets the loss, step " << step;
  }
}

// A Pipeline alone (one rank), whatever the environment says.
PipelineOptions alone() {
  return PipelineOptions().rank_env(comm::RankEnv{});
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no baton::Error)";
}

TEST(Pipeline, RefusesAnEmptyModel) {
  EXPECT_THAT(error_of([] { Pipeline(torch::nn::Sequential(), loss_fn, alone()); }),
              HasSubstr("[pipeline] model \"sequential\" has 0 layers"));
  EXPECT_THAT(error_of([] {
                Pipeline(nn::ModelSpec{"mine", {}, loss_fn}, {}, alone());
              }),
              HasSubstr("model \"mine\" has 0 layers"));
}

TEST(Pipeline, RefusesMoreMicrobatchesThanTheBatchHolds) {
  Pipeline pipe(make_sequential(), loss_fn, alone().microbatches(8));
  EXPECT_THAT(error_of([&] {
                pipe.step(torch::randn({4, 8}), torch::zeros({4}, torch::kLong));
              }),
              HasSubstr("[pipeline] microbatches=8 is more than the batch of 4 samples"));
}

TEST(Pipeline, RefusesAScheduleUndefinedForTheSizes) {
  EXPECT_THAT(error_of([] {
                Pipeline(make_sequential(), loss_fn, alone().schedule("zb-h2").microbatches(1));
              }),
              HasSubstr("needs m >= 2p"));
  EXPECT_THAT(error_of([] { Pipeline(make_sequential(), loss_fn, alone().schedule("fancy")); }),
              HasSubstr("\"fancy\""));
}

TEST(Pipeline, RefusesAGridOtherThanTheWorldSize) {
  EXPECT_THAT(error_of([] { Pipeline(make_sequential(), loss_fn, alone().pp(2)); }),
              HasSubstr("[pipeline] dp=1 x pp=2 is 2 ranks but the world has 1"));
  EXPECT_THAT(
      error_of([] { Pipeline(make_sequential(), loss_fn, alone().dp(2)); }),
      HasSubstr("[pipeline] dp=2 does not divide the world of 1 ranks into equal pipelines"));
}

TEST(Pipeline, RefusesMoreStagesThanLayers) {
  torch::nn::Sequential one(torch::nn::Linear(8, 4));
  EXPECT_THAT(
      error_of([&] { Pipeline(one, loss_fn, alone().schedule("interleaved").microbatches(2)); }),
      HasSubstr("makes 2 stages but model \"sequential\" has only 1 layers"));
}

TEST(Pipeline, RefusesBadNamesAndAProfilingBalanceWithoutASample) {
  EXPECT_THAT(
      error_of([] { Pipeline(make_sequential(), loss_fn, alone().recompute("sometimes")); }),
      HasSubstr("unknown recompute mode \"sometimes\""));
  EXPECT_THAT(error_of([] { Pipeline(make_sequential(), loss_fn, alone().balance("evenly")); }),
              HasSubstr("evenly"));
  EXPECT_THAT(
      error_of([] { Pipeline(make_sequential(), loss_fn, alone().balance("time")); }),
      HasSubstr("[pipeline] balance \"time\" cuts by the layers' costs, profiled on a sample"));
  EXPECT_THAT(
      error_of([] { Pipeline(make_sequential(), loss_fn, alone().schedule("zb-auto")); }),
      HasSubstr(
          "[pipeline] schedule \"zb-auto\" searches with the layers' costs, profiled on a sample"));
  EXPECT_THAT(
      error_of([] { Pipeline(make_sequential(), loss_fn, alone().device(torch::Device("meta"))); }),
      HasSubstr("[comm.device] device meta is not supported; use cpu or cuda"));
  EXPECT_THAT(
      error_of([] {
        Pipeline(
            nn::ModelSpec{
                "mine",
                {nn::LayerSpec{"l", [] { return torch::nn::AnyModule(torch::nn::Linear(2, 2)); }}},
                nullptr},
            {}, alone());
      }),
      HasSubstr("[pipeline] loss is empty and model \"mine\" has none"));
}

TEST(Pipeline, BalancesByTimeOnASampleWithoutLeavingGradients) {
  at::set_num_threads(1);
  torch::nn::Sequential model = make_sequential();
  Pipeline pipe(model, loss_fn, alone().balance("time").sample(batch(0).first.narrow(0, 0, 3)));
  for (const auto& p : pipe.parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_EQ(pipe.partition().layers(), 5);
}

}  // namespace
}  // namespace baton
