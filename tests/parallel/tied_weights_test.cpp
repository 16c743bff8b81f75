// Tied weights (gpt --tie-embeddings) through the façade, ranks as threads:
// over 3 SGD steps the pipeline takes the losses of one process whose LM head
// uses the token embedding's very tensor (one parameter, autograd summing
// both uses), within 1e-5 relative, on layouts that put the two copies on
// different ranks (1f1b, pp 2; with dp 2), in one stage (pp 1), on one rank
// in two stages (zb-v: stages 0 and 3 on rank 0), and on every rank twice
// (chimera: both stages replicated); and the copies stay bitwise identical.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "baton/baton.h"
#include "baton/comm/local_group.h"
#include "baton/nn/layer_spec.h"
#include "baton/nn/models.h"
#include "baton/nn/transformer.h"
#include "tests/pipeline/reference_training.h"

namespace baton {
namespace {

constexpr int kSteps = 3, kBlocks = 2;
constexpr int kHidden = 16, kHeads = 4, kVocab = 32, kContext = 8, kBatch = 8;
constexpr int kHeadLayer = kBlocks + 1;
constexpr double kLr = 0.05;
constexpr uint64_t kSeed = 1;  // PipelineOptions' default seed
const auto kTimeout = std::chrono::seconds(60);
const std::string kEmbedding = "layer.0.token.weight";
const std::string kHead = "layer." + std::to_string(kHeadLayer) + ".head.weight";

nn::ModelSpec tied_gpt() {
  return nn::gpt(kBlocks, kHidden, kHeads, kVocab, kContext, /*tie_embeddings=*/true);
}

std::pair<torch::Tensor, torch::Tensor> tokens(int step) {
  torch::Generator gen = at::detail::createCPUGenerator(700 + step);
  return {torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong),
          torch::randint(0, kVocab, {kBatch, kContext}, gen, torch::kLong)};
}

struct TiedRun {
  std::vector<double> losses;
  std::map<std::string, torch::Tensor> parameters;
};

// One process, one parameter: the head multiplies by the embedding's tensor.
TiedRun one_shared_parameter() {
  const nn::ModelSpec spec = tied_gpt();
  torch::nn::Sequential model = nn::build_sequential(spec, kSeed);
  auto embedding = model[0]->as<nn::TokenEmbeddingImpl>();
  auto head = model[kHeadLayer]->as<nn::LmHeadImpl>();
  // The embedding looks up rows of the head's weight (baton's Linear writes
  // its weight gradient into the tensor it was built with, so the head keeps
  // its own and the embedding is pointed at it; both start from one value).
  embedding->token->weight = head->head->weight;
  // The embedding's own registered weight is no longer used; the optimizer
  // gets every parameter that the forward reaches, the shared one once.
  std::vector<torch::Tensor> parameters;
  for (auto& item : model->named_parameters()) {
    if (item.key() != "0.token.weight") parameters.push_back(item.value());
  }
  torch::optim::SGD sgd(parameters, torch::optim::SGDOptions(kLr));
  TiedRun run;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = tokens(step);
    sgd.zero_grad();
    torch::Tensor loss = spec.loss(model->forward(x), y);
    loss.backward();
    run.losses.push_back(loss.item<double>());
    sgd.step();
  }
  run.parameters[kEmbedding] = head->head->weight.detach().clone();
  return run;
}

TiedRun train(const PipelineOptions& base, comm::Communicator* comm) {
  PipelineOptions options = base;
  if (comm != nullptr) options.communicator(*comm);
  Pipeline pipe(tied_gpt(), nullptr, options);
  torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
  TiedRun run;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = tokens(step);
    sgd.zero_grad();
    run.losses.push_back(pipe.step(x, y));
    sgd.step();
  }
  for (auto& [name, value] : pipe.named_parameters()) run.parameters[name] = value.detach().clone();
  return run;
}

struct Layout {
  const char* name;
  int dp, pp;
  const char* schedule;
};

class TiedWeights : public testing::TestWithParam<Layout> {};

TEST_P(TiedWeights, TakeTheStepsOfOneSharedParameterAndTheCopiesStayIdentical) {
  at::set_num_threads(1);
  const Layout layout = GetParam();
  static const TiedRun reference = one_shared_parameter();
  const PipelineOptions options =
      PipelineOptions().schedule(layout.schedule).microbatches(2).dp(layout.dp).pp(layout.pp);
  const int world = layout.dp * layout.pp;
  std::vector<TiedRun> runs(world);
  if (world == 1) {
    runs[0] = train(options, nullptr);
  } else {
    comm::run_local_group(world, kTimeout, [&](comm::Communicator& comm) {
      runs[comm.rank()] = train(options, &comm);
    });
  }
  const torch::Tensor& want = reference.parameters.at(kEmbedding);
  int embeddings = 0, heads = 0;
  for (int r = 0; r < world; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << "rank " << r << " step " << step;
    }
    for (const std::string& name : {kEmbedding, kHead}) {
      const auto found = runs[r].parameters.find(name);
      if (found == runs[r].parameters.end()) continue;
      (name == kEmbedding ? embeddings : heads) += 1;
      EXPECT_LT(test::relative(found->second, want), 1e-5) << name << " on rank " << r;
      // Every copy on every rank holds the same bits as the first rank's embedding.
      EXPECT_TRUE(torch::equal(found->second, runs[0].parameters.at(kEmbedding)))
          << name << " on rank " << r << " differs from rank 0's embedding";
    }
  }
  // Each replica holds both copies (each rank of chimera holds both stages).
  EXPECT_GE(embeddings, layout.dp);
  EXPECT_GE(heads, layout.dp);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TiedWeights,
    testing::Values(Layout{"one_stage", 1, 1, "1f1b"}, Layout{"pp2_1f1b", 1, 2, "1f1b"},
                    Layout{"dp2_pp2_1f1b", 2, 2, "1f1b"}, Layout{"pp2_zbv", 1, 2, "zb-v"},
                    Layout{"pp2_chimera", 1, 2, "chimera"}),
    [](const testing::TestParamInfo<Layout>& info) { return std::string(info.param.name); });

TEST(TiedWeights, TheHeadStartsFromTheEmbeddingsInitialValue) {
  const nn::ModelSpec spec = tied_gpt();
  auto embedding = nn::build_layer(spec, 0, kSeed).ptr()->named_parameters()["token.weight"];
  auto head = nn::build_layer(spec, kHeadLayer, kSeed).ptr()->named_parameters()["head.weight"];
  EXPECT_TRUE(torch::equal(embedding, head));
  // Untied, the head draws its own.
  const nn::ModelSpec untied = nn::gpt(kBlocks, kHidden, kHeads, kVocab, kContext);
  auto own = nn::build_layer(untied, kHeadLayer, kSeed).ptr()->named_parameters()["head.weight"];
  EXPECT_FALSE(torch::equal(embedding, own));
}

TEST(TiedWeights, OnlyGptHasAnEmbeddingToTie) {
  try {
    nn::make_model("mlp", nn::ModelOptions().tie_embeddings(true));
    FAIL() << "mlp with tie_embeddings was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no embedding to tie"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace baton
