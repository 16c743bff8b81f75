// Variable sequence length: the gpt model trained on 2 ranks with a context
// that changes from step to step (8, 5, 5, 8, 3 tokens), so every boundary
// activation [b, T, hidden] and its gradient change shape mid-run, over each
// point-to-point transport, takes the losses and ends with the parameters of
// the same layers trained on one device, within 1e-5 relative. Steps overlap
// (no step barrier), so a fast rank's messages of the next length may arrive
// before its peer has taken the last of the previous one.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/nn/models.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

constexpr int kHidden = 16, kHeads = 4, kVocab = 32, kContext = 8, kBatch = 8;
constexpr uint64_t kSeed = 5;
constexpr double kLr = 0.05;
const std::vector<int64_t> kLengths = {8, 5, 5, 8, 3};  // tokens per sequence, step by step
const auto kTimeout = std::chrono::seconds(60);

nn::ModelSpec gpt() {
  return nn::gpt(/*layers=*/2, kHidden, kHeads, kVocab, kContext);
}

// Step `step`'s inputs and next-token targets, kLengths[step] tokens long.
std::pair<torch::Tensor, torch::Tensor> tokens(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(700 + step);
  const int64_t length = kLengths[static_cast<size_t>(step)];
  return {torch::randint(0, kVocab, {kBatch, length}, gen, torch::kLong),
          torch::randint(0, kVocab, {kBatch, length}, gen, torch::kLong)};
}

// One device: the same layers, built whole with the same seed.
test::TrainingRun train_one_device() {
  const nn::ModelSpec spec = gpt();
  torch::nn::Sequential whole = nn::build_sequential(spec, kSeed);
  torch::optim::SGD sgd(whole->parameters(), torch::optim::SGDOptions(kLr));
  test::TrainingRun run;
  for (int step = 0; step < static_cast<int>(kLengths.size()); ++step) {
    auto [x, y] = tokens(step);
    sgd.zero_grad();
    torch::Tensor loss = spec.loss(whole->forward(x), y);
    loss.backward();
    sgd.step();
    run.losses.push_back(loss.item<double>());
  }
  for (const auto& item : whole->named_parameters())
    run.parameters["layer." + item.key()] = item.value().detach().clone();
  return run;
}

struct Case {
  std::string schedule;
  comm::TransportKind transport;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.schedule << " over " << comm::to_string(c.transport);
}

class VariableSequenceLength : public testing::TestWithParam<Case> {};

TEST_P(VariableSequenceLength, ShorterAndLongerContextsMidRunTakeTheStepsOfOneDevice) {
  at::set_num_threads(1);
  const Case& c = GetParam();
  const test::TrainingRun reference = train_one_device();
  std::vector<test::TrainingRun> runs(2);
  comm::run_local_group(
      2, kTimeout,
      [&](comm::Communicator& comm) {
        const int r = comm.rank();
        const std::string expected = c.transport == comm::TransportKind::kGloo ? "gloo" : "shm";
        BATON_CHECK(comm.transport_name(1 - r) == expected, "rank ", r, " reaches its peer over ",
                    comm.transport_name(1 - r), ", expected ", expected);
        Pipeline pipe(
            gpt(), {},
            PipelineOptions().schedule(c.schedule).microbatches(4).seed(kSeed).communicator(comm));
        torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
        for (int step = 0; step < static_cast<int>(kLengths.size()); ++step) {
          auto [x, y] = tokens(step);
          sgd.zero_grad();
          runs[r].losses.push_back(pipe.step(x, y));
          sgd.step();
        }
        for (auto& [name, value] : pipe.named_parameters())
          runs[r].parameters[name] = value.detach().clone();
      },
      c.transport);
  std::map<std::string, int> seen;
  for (int r = 0; r < 2; ++r) {
    for (size_t step = 0; step < kLengths.size(); ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << "rank " << r << " step " << step << " (" << kLengths[step] << " tokens)";
    }
    for (const auto& [name, value] : runs[r].parameters) {
      ++seen[name];
      ASSERT_TRUE(reference.parameters.count(name)) << name;
      EXPECT_LT(test::relative(value, reference.parameters.at(name)), 1e-5)
          << name << " on rank " << r;
    }
  }
  EXPECT_EQ(seen.size(), reference.parameters.size());
}

INSTANTIATE_TEST_SUITE_P(SchedulesAndTransports, VariableSequenceLength,
                         testing::Values(Case{"1f1b", comm::TransportKind::kShm},
                                         Case{"1f1b", comm::TransportKind::kGloo},
                                         Case{"gpipe", comm::TransportKind::kShm},
                                         Case{"gpipe", comm::TransportKind::kGloo}),
                         [](const testing::TestParamInfo<Case>& info) {
                           return info.param.schedule + "_" +
                                  std::string(comm::to_string(info.param.transport));
                         });

}  // namespace
}  // namespace baton
