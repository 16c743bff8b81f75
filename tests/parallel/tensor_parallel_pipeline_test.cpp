// Data x pipeline x tensor parallelism through the façade (ranks as threads):
// the gpt model on the grids (dp, pp, tp) = (1,1,2), (1,2,2), (2,1,2) and
// (2,2,2) takes, over 3 SGD steps, the losses of one process on the whole
// mini-batch within 1e-5 relative, and ends with its parameters: the split
// ones (each tp rank's heads of the QKV projection, its columns of the output
// projection, its share of the MLP) equal to their slices of the
// one-process parameters, the others whole. The mlp's column/row Linear pairs
// do the same at (1,2,2). Bad grids are refused by name.
#include <ATen/Parallel.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/nn/models.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

constexpr int kSteps = 3;
constexpr int kHidden = 16, kHeads = 4, kVocab = 32, kContext = 8, kBatch = 8;
constexpr double kLr = 0.05;
const auto kTimeout = std::chrono::seconds(60);

nn::ModelSpec gpt() {
  return nn::gpt(/*layers=*/2, kHidden, kHeads, kVocab, kContext);
}

std::pair<torch::Tensor, torch::Tensor> tokens(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(500 + step);
  return {torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong),
          torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong)};
}

struct GridRun {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> parameters;
};

GridRun train(int dp, int pp, int tp, comm::Communicator* comm,
              const std::string& schedule = "1f1b") {
  PipelineOptions options =
      PipelineOptions().schedule(schedule).microbatches(2).dp(dp).pp(pp).tp(tp);
  if (comm != nullptr) options.communicator(*comm);
  Pipeline pipe(gpt(), nullptr, options);
  torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
  GridRun run;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = tokens(step);
    sgd.zero_grad();
    run.losses.push_back(pipe.step(x, y));
    sgd.step();
  }
  for (auto& [name, value] : pipe.named_parameters()) run.parameters[name] = value.detach().clone();
  return run;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Tensor-parallel rank k's share of the one-process parameter `whole`.
torch::Tensor share(const std::string& name, const torch::Tensor& whole, int k, int t) {
  const int64_t slice = kHidden / t;
  if (ends_with(name, "qkv.weight") || ends_with(name, "qkv.bias")) {
    std::vector<torch::Tensor> parts;
    for (int part = 0; part < 3; ++part)
      parts.push_back(whole.narrow(0, part * kHidden + k * slice, slice));
    return torch::cat(parts);
  }
  if (ends_with(name, "fc1.weight") || ends_with(name, "fc1.bias"))
    return whole.narrow(0, 4 * k * slice, 4 * slice);
  if (ends_with(name, "fc2.weight")) return whole.narrow(1, 4 * k * slice, 4 * slice);
  if (ends_with(name, "proj.weight")) return whole.narrow(1, k * slice, slice);
  return whole;
}

struct Grid {
  int dp, pp, tp;
};

class TensorParallelGrids : public testing::TestWithParam<Grid> {};

TEST_P(TensorParallelGrids, TakesTheStepsOfOneProcessWithEachRanksShareOfTheParameters) {
  at::set_num_threads(1);
  const Grid g = GetParam();
  const GridRun reference = train(1, 1, 1, nullptr);
  const int world = g.dp * g.pp * g.tp;
  std::vector<GridRun> runs(world);
  comm::run_local_group(world, kTimeout, [&](comm::Communicator& comm) {
    runs[comm.rank()] = train(g.dp, g.pp, g.tp, &comm);
  });
  std::map<std::string, int> seen;
  for (int r = 0; r < world; ++r) {
    const int k = r % g.tp;  // tp varies fastest
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << "rank " << r << " step " << step;
    }
    for (const auto& [name, value] : runs[r].parameters) {
      ++seen[name];
      ASSERT_TRUE(reference.parameters.count(name)) << name;
      const torch::Tensor want = share(name, reference.parameters.at(name), k, g.tp);
      ASSERT_EQ(value.sizes(), want.sizes()) << name << " on rank " << r;
      EXPECT_LT(test::relative(value, want), 1e-5) << name << " on rank " << r;
    }
  }
  // Every parameter is held by each of the dp x tp ranks of its stage.
  EXPECT_EQ(seen.size(), reference.parameters.size());
  for (const auto& [name, count] : seen) EXPECT_EQ(count, g.dp * g.tp) << name;
}

INSTANTIATE_TEST_SUITE_P(Grids, TensorParallelGrids,
                         testing::Values(Grid{1, 1, 2}, Grid{1, 2, 2}, Grid{2, 1, 2},
                                         Grid{2, 2, 2}),
                         [](const testing::TestParamInfo<Grid>& info) {
                           return "dp" + std::to_string(info.param.dp) + "_pp" +
                                  std::to_string(info.param.pp) + "_tp" +
                                  std::to_string(info.param.tp);
                         });

TEST(TensorParallelGrids, ZeroBubbleAndInterleavedRunWithTensorParallelism) {
  at::set_num_threads(1);
  const GridRun reference = train(1, 1, 1, nullptr);
  for (const std::string schedule : {"zb-h1", "interleaved"}) {
    std::vector<GridRun> runs(4);
    comm::run_local_group(4, kTimeout, [&](comm::Communicator& comm) {
      runs[comm.rank()] = train(1, 2, 2, &comm, schedule);
    });
    for (int r = 0; r < 4; ++r) {
      for (int step = 0; step < kSteps; ++step) {
        EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                    1e-5 * std::abs(reference.losses[step]))
            << schedule << " rank " << r << " step " << step;
      }
    }
  }
}

// Megatron's scatter/gather: each tp rank sends 1/t of a boundary (the
// executor's record of the bytes it sent) and the losses are bitwise those of
// sending it whole.
TEST(TensorParallelGrids, ScatterGatherSendsATthOfEachBoundaryWithTheSameLosses) {
  at::set_num_threads(1);
  std::map<bool, std::vector<double>> losses, sent;
  for (const bool scatter : {true, false}) {
    std::vector<double> bytes(4), loss(4);
    comm::run_local_group(4, kTimeout, [&](comm::Communicator& comm) {
      Pipeline pipe(
          gpt(), nullptr,
          PipelineOptions().microbatches(2).pp(2).tp(2).tp_scatter_gather(scatter).communicator(
              comm));
      auto [x, y] = tokens(0);
      loss[comm.rank()] = pipe.step(x, y);
      const auto& boundary = pipe.last_step().stage_boundary_bytes;
      if (boundary.count(0)) bytes[comm.rank()] = boundary.at(0);
    });
    losses[scatter] = loss;
    sent[scatter] = bytes;
  }
  EXPECT_EQ(losses[true], losses[false]);
  // Ranks 0 and 1 are stage 0's tp ranks: a [4, 8, 16] fp32 activation per micro-batch whole.
  for (int r : {0, 1}) {
    EXPECT_EQ(sent[false][r], kBatch / 2 * kContext * kHidden * 4.0) << "rank " << r;
    EXPECT_EQ(sent[true][r], sent[false][r] / 2) << "rank " << r;
  }
}

// Evaluation runs the forward-only schedule through the executor's one
// interpreter, tensor-parallel scatter/gather included: with tp=2 the last
// stage's ranks return tp=1's outputs (within 1e-5 relative), also for more
// micro-batches than training uses, and scatter/gather changes no bit.
TEST(TensorParallelGrids, EvaluationWithTpTwoGivesTheOutputsOfTpOne) {
  at::set_num_threads(1);
  const torch::Tensor x = tokens(7).first;
  auto evaluate = [&](int tp, bool scatter) {
    std::vector<torch::Tensor> outputs(2 * tp);
    comm::run_local_group(2 * tp, kTimeout, [&](comm::Communicator& comm) {
      Pipeline pipe(
          gpt(), nullptr,
          PipelineOptions().microbatches(2).pp(2).tp(tp).tp_scatter_gather(scatter).communicator(
              comm));
      std::vector<torch::Tensor> parts;
      for (auto& [mb, out] : pipe.eval_microbatches(x, 4)) parts.push_back(out);
      if (!parts.empty()) outputs[comm.rank()] = torch::cat(parts);
    });
    return outputs;
  };
  const std::vector<torch::Tensor> one = evaluate(1, true);
  ASSERT_TRUE(one[1].defined());
  ASSERT_EQ(one[1].size(0), kBatch);
  const std::map<bool, std::vector<torch::Tensor>> two{{true, evaluate(2, true)},
                                                       {false, evaluate(2, false)}};
  for (const auto& [scatter, outputs] : two) {
    // Ranks 2 and 3 hold the last stage (tp varies fastest); ranks 0 and 1 finish nothing.
    for (int r : {0, 1}) EXPECT_FALSE(outputs[r].defined()) << "rank " << r;
    for (int r : {2, 3}) {
      ASSERT_TRUE(outputs[r].defined()) << "rank " << r << " scatter " << scatter;
      ASSERT_EQ(outputs[r].sizes(), one[1].sizes());
      EXPECT_LT(test::relative(outputs[r], one[1]), 1e-5) << "rank " << r << " scatter " << scatter;
      EXPECT_TRUE(torch::equal(outputs[r], two.at(false)[r])) << "rank " << r;
    }
  }
}

// The mlp's column/row Linear pairs (layers 0-1 and 2-3 of four) at
// (dp, pp, tp) = (1,2,2): the losses and parameters of one process after 3
// steps, whether the stage boundary falls between the pairs (uniform) or
// inside one (balance 1,3), with scatter/gather on and off.
struct MlpCase {
  std::string balance;
  bool scatter;
};

class MlpTensorParallel : public testing::TestWithParam<MlpCase> {};

TEST_P(MlpTensorParallel, TakesTheStepsOfOneProcessWithEachRanksShareOfTheParameters) {
  at::set_num_threads(1);
  const MlpCase c = GetParam();
  const nn::ModelSpec spec = nn::mlp(/*layers=*/4, /*hidden=*/16, /*in_features=*/8, /*classes=*/4);
  auto batch_of = [](int step) { return test::seeded_batch(900 + step, kBatch); };
  const test::TrainingRun reference =
      test::train_one_process(nn::build_sequential(spec, /*seed=*/1), kSteps, kLr, batch_of);
  std::vector<test::TrainingRun> runs(4);
  comm::run_local_group(4, kTimeout, [&](comm::Communicator& comm) {
    Pipeline pipe(spec, nullptr,
                  PipelineOptions()
                      .microbatches(2)
                      .pp(2)
                      .tp(2)
                      .balance(c.balance)
                      .tp_scatter_gather(c.scatter)
                      .communicator(comm));
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
    test::TrainingRun& run = runs[comm.rank()];
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = batch_of(step);
      sgd.zero_grad();
      run.losses.push_back(pipe.step(x, y));
      sgd.step();
    }
    for (auto& [name, value] : pipe.named_parameters()) run.parameters[name] = value.detach();
  });
  std::map<std::string, int> seen;
  for (int r = 0; r < 4; ++r) {
    const int k = r % 2;
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << "rank " << r << " step " << step;
    }
    for (const auto& [name, value] : runs[r].parameters) {
      ++seen[name];
      ASSERT_TRUE(reference.parameters.count(name)) << name;
      const torch::Tensor& whole = reference.parameters.at(name);
      // "layer.<i>.0.weight": even layers are column-parallel, odd ones row-parallel.
      const bool row = (name[6] - '0') % 2 == 1;
      const torch::Tensor want =
          row ? (ends_with(name, "weight") ? whole.chunk(2, 1)[k] : whole) : whole.chunk(2, 0)[k];
      ASSERT_EQ(value.sizes(), want.sizes()) << name << " on rank " << r;
      EXPECT_LT(test::relative(value, want), 1e-5) << name << " on rank " << r;
    }
  }
  EXPECT_EQ(seen.size(), reference.parameters.size());
}

INSTANTIATE_TEST_SUITE_P(Mlp, MlpTensorParallel,
                         testing::Values(MlpCase{"uniform", true}, MlpCase{"1,3", true},
                                         MlpCase{"1,3", false}),
                         [](const testing::TestParamInfo<MlpCase>& info) {
                           return (info.param.balance == "uniform" ? std::string("uniform")
                                                                   : std::string("one_three")) +
                                  (info.param.scatter ? "_scatter" : "_whole");
                         });

TEST(TensorParallelErrors, AGridThatIsNotTheWorldOrATpThatDoesNotDivideTheHeadsIsRefused) {
  std::vector<std::string> messages(4);
  comm::run_local_group(4, kTimeout, [&](comm::Communicator& comm) {
    try {
      Pipeline(gpt(), nullptr, PipelineOptions().dp(1).pp(2).tp(3).communicator(comm));
    } catch (const Error& e) {
      messages[comm.rank()] = e.what();
    }
  });
  for (const auto& m : messages)
    EXPECT_THAT(m, testing::HasSubstr("dp=1 x pp=2 x tp=3 is 6 ranks but the world has 4"));
  std::vector<std::string> heads(3);
  comm::run_local_group(3, kTimeout, [&](comm::Communicator& comm) {
    try {
      Pipeline(gpt(), nullptr, PipelineOptions().pp(1).tp(3).communicator(comm));
    } catch (const Error& e) {
      heads[comm.rank()] = e.what();
    }
  });
  for (const auto& m : heads) EXPECT_THAT(m, testing::HasSubstr("tp=3 must divide the heads (4)"));
}

}  // namespace
}  // namespace baton
