// The llama model through the façade (ranks as threads): its boundaries carry
// hidden states, int64 positions and, when given, a boolean padding mask.
// On the grids (dp, pp, tp) = (1,2,1), (1,4,1) interleaved, (2,2,1) and
// (1,2,2), with and without the mask and with tied embeddings, 3 SGD steps
// give the losses of one process that calls the same layers by hand on the
// whole mini-batch within 1e-5 relative, and end with its parameters: the
// split ones (each tp rank's heads of wq, wk, wv and columns of wo, its units
// of the SwiGLU) equal to their slices of the one-process parameters, the
// others whole.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/nn/llama.h"
#include "baton/nn/models.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

using Tensors = std::vector<torch::Tensor>;

// 6 blocks: interleaved at p = 4 makes 8 stages of one layer each.
constexpr int kLayers = 6, kHidden = 16, kHeads = 4, kVocab = 32, kTime = 8, kBatch = 8;
constexpr int kSteps = 3;
constexpr double kLr = 0.05;
constexpr uint64_t kSeed = 1;  // PipelineOptions' default seed
const auto kTimeout = std::chrono::seconds(120);

struct Case {
  int dp, pp, tp;
  std::string schedule;
  bool mask;
  bool tied;
};

void PrintTo(const Case& c, std::ostream* out) {
  *out << "dp" << c.dp << " pp" << c.pp << " tp" << c.tp << " " << c.schedule
       << (c.mask ? " mask" : "") << (c.tied ? " tied" : "");
}

nn::ModelSpec llama(bool tied) {
  return nn::llama(kLayers, kHidden, kHeads, kVocab, tied);
}

struct Batch {
  Tensors inputs;  // {tokens} or {tokens, mask}
  torch::Tensor targets;
};

Batch batch(int step, bool mask) {
  torch::Generator gen = at::detail::createCPUGenerator(700 + step);
  Batch b{{torch::randint(0, kVocab, {kBatch, kTime}, gen, torch::kLong)},
          torch::randint(0, kVocab, {kBatch, kTime}, gen, torch::kLong)};
  if (mask) b.inputs.push_back(torch::rand({kBatch, kTime}, gen) > 0.3);
  return b;
}

struct LlamaRun {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> parameters;  // "layer.<index>.<name>"
};

// One process: the layers called in order on the whole mini-batch.
LlamaRun one_process(const Case& c) {
  const nn::ModelSpec spec = llama(c.tied);
  torch::nn::Sequential model = nn::build_sequential(spec, kSeed);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(kLr));
  LlamaRun run;
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = batch(step, c.mask);
    sgd.zero_grad();
    auto layer = model->begin();
    Tensors h = layer->forward<Tensors>(b.inputs);
    for (++layer; layer + 1 != model->end(); ++layer) h = layer->forward<Tensors>(h);
    const torch::Tensor loss = spec.loss(layer->forward<torch::Tensor>(h), b.targets);
    loss.backward();
    if (c.tied) {
      // One shared matrix: both copies start equal and step by the sum of their gradients.
      torch::Tensor& token = model[0]->as<nn::LlamaEmbeddingImpl>()->token->weight;
      torch::Tensor& head = model[kLayers + 1]->as<nn::LlamaHeadImpl>()->head->weight;
      const torch::Tensor sum = token.grad() + head.grad();
      token.mutable_grad() = sum.clone();
      head.mutable_grad() = sum.clone();
    }
    sgd.step();
    run.losses.push_back(loss.item<double>());
  }
  for (const auto& item : model->named_parameters())
    run.parameters["layer." + item.key()] = item.value().detach().clone();
  return run;
}

LlamaRun pipelined(const Case& c, comm::Communicator& comm) {
  Pipeline pipe(llama(c.tied), nullptr,
                PipelineOptions()
                    .schedule(c.schedule)
                    .microbatches(4)
                    .dp(c.dp)
                    .pp(c.pp)
                    .tp(c.tp)
                    .communicator(comm));
  torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
  LlamaRun run;
  for (int step = 0; step < kSteps; ++step) {
    const Batch b = batch(step, c.mask);
    sgd.zero_grad();
    run.losses.push_back(pipe.step(b.inputs, b.targets));
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
  for (const char* column : {"wq.weight", "wk.weight", "wv.weight", "gate.weight", "up.weight"}) {
    if (ends_with(name, column)) return whole.chunk(t, 0)[k];
  }
  if (ends_with(name, "wo.weight") || ends_with(name, "down.weight")) return whole.chunk(t, 1)[k];
  return whole;
}

class LlamaGrids : public testing::TestWithParam<Case> {};

TEST_P(LlamaGrids, TakesTheStepsOfOneProcessWithEachRanksShareOfTheParameters) {
  at::set_num_threads(1);
  const Case c = GetParam();
  const LlamaRun reference = one_process(c);
  const int world = c.dp * c.pp * c.tp;
  std::vector<LlamaRun> runs(world);
  comm::run_local_group(world, kTimeout,
                        [&](comm::Communicator& comm) { runs[comm.rank()] = pipelined(c, comm); });
  std::map<std::string, int> seen;
  for (int r = 0; r < world; ++r) {
    const int k = r % c.tp;  // tp varies fastest
    ASSERT_EQ(runs[r].losses.size(), static_cast<size_t>(kSteps));
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << "rank " << r << " step " << step;
    }
    for (const auto& [name, value] : runs[r].parameters) {
      ++seen[name];
      ASSERT_TRUE(reference.parameters.count(name)) << name;
      const torch::Tensor want = share(name, reference.parameters.at(name), k, c.tp);
      ASSERT_EQ(value.sizes(), want.sizes()) << name << " on rank " << r;
      EXPECT_LT(test::relative(value, want), 1e-5) << name << " on rank " << r;
    }
  }
  // Every parameter is held by each of the dp x tp ranks of its stage.
  EXPECT_EQ(seen.size(), reference.parameters.size());
  for (const auto& [name, count] : seen) EXPECT_EQ(count, c.dp * c.tp) << name;
}

INSTANTIATE_TEST_SUITE_P(
    Grids, LlamaGrids,
    testing::Values(Case{1, 2, 1, "1f1b", false, false}, Case{1, 2, 1, "1f1b", true, false},
                    Case{1, 4, 1, "interleaved", true, false}, Case{2, 2, 1, "1f1b", true, false},
                    Case{1, 2, 2, "1f1b", true, false}, Case{1, 2, 2, "1f1b", false, true}),
    [](const testing::TestParamInfo<Case>& info) {
      const Case& c = info.param;
      return "dp" + std::to_string(c.dp) + "_pp" + std::to_string(c.pp) + "_tp" +
             std::to_string(c.tp) + "_" + (c.schedule == "1f1b" ? "onefoneb" : c.schedule) +
             (c.mask ? "_mask" : "") + (c.tied ? "_tied" : "");
    });

}  // namespace
}  // namespace baton
