// Tied weights (gpt --tie-embeddings) through the façade, ranks as threads:
// over 3 SGD steps the pipeline takes the losses of one process whose LM head
// uses the token embedding's very tensor (one parameter, autograd summing
// both uses), within 1e-5 relative, on layouts that put the two copies on
// different ranks (1f1b, pp 2; with dp 2), in one stage (pp 1), on one rank
// in two stages (zb-v: stages 0 and 3 on rank 0), and on every rank twice
// (chimera: both stages replicated); and the copies stay bitwise identical.
// Global-norm clipping (PipelineOptions::clip_grad_norm, the CLIP_NORM
// action) on the grids (dp, pp, tp) = (1,2,1), (2,2,1), (1,2,2), (2,2,2) and
// on chimera: the losses and norms of one process that clips with
// torch::nn::utils::clip_grad_norm_, within 1e-5; and at max norm 0.1 the run
// differs from an unclipped one.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
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
  std::vector<double> norms;  // the gradients' global norm before each step's clip
  std::map<std::string, torch::Tensor> parameters;
};

// One process, one parameter: the head multiplies by the embedding's tensor.
// With `max_norm` above 0 the gradients are clipped to it by LibTorch's own
// clip_grad_norm_ before each step.
TiedRun one_shared_parameter(double max_norm = 0) {
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
    if (max_norm > 0) run.norms.push_back(torch::nn::utils::clip_grad_norm_(parameters, max_norm));
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
    run.norms.push_back(pipe.last_step().grad_norm);
    sgd.step();
  }
  for (auto& [name, value] : pipe.named_parameters()) run.parameters[name] = value.detach().clone();
  return run;
}

// `options` on dp x pp x tp ranks as threads (one process without a group).
std::vector<TiedRun> train_on_ranks(const PipelineOptions& options, int world) {
  std::vector<TiedRun> runs(world);
  if (world == 1) {
    runs[0] = train(options, nullptr);
  } else {
    comm::run_local_group(world, kTimeout, [&](comm::Communicator& comm) {
      runs[comm.rank()] = train(options, &comm);
    });
  }
  return runs;
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
  const std::vector<TiedRun> runs = train_on_ranks(options, world);
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

struct ClipGrid {
  const char* name;
  int dp, pp, tp;
  const char* schedule;
};

class ClipGradNorm : public testing::TestWithParam<ClipGrid> {};

// Each tied copy, tp slice, tp-replicated norm weight and dp replica counts
// once: any of them counted twice (or missed) moves the norm, and with it the
// clip and every later loss, off one process's.
TEST_P(ClipGradNorm, TakesTheStepsOfOneProcessClippingWithLibTorch) {
  at::set_num_threads(1);
  const ClipGrid g = GetParam();
  constexpr double kMax = 0.1;
  static const TiedRun reference = one_shared_parameter(kMax);
  static const TiedRun unclipped = one_shared_parameter();
  const PipelineOptions options = PipelineOptions()
                                      .schedule(g.schedule)
                                      .microbatches(2)
                                      .dp(g.dp)
                                      .pp(g.pp)
                                      .tp(g.tp)
                                      .clip_grad_norm(kMax);
  const int world = g.dp * g.pp * g.tp;
  const std::vector<TiedRun> runs = train_on_ranks(options, world);
  for (int step = 0; step < kSteps; ++step) {
    // The clip binds: the norm is above 0.1 at every step.
    ASSERT_GT(reference.norms[step], 2 * kMax) << "step " << step;
    for (int r = 0; r < world; ++r) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]))
          << "rank " << r << " step " << step;
      EXPECT_NEAR(runs[r].norms[step], reference.norms[step], 1e-5 * reference.norms[step])
          << "rank " << r << " step " << step;
    }
  }
  // Clipping changed the run: from the second step on, the losses differ, by
  // far more than the 1e-5 the runs above agree within (about 3e-4 here).
  EXPECT_GT(std::abs(reference.losses[kSteps - 1] - unclipped.losses[kSteps - 1]),
            1e-4 * std::abs(unclipped.losses[kSteps - 1]));
  EXPECT_GT(std::abs(runs[0].losses[kSteps - 1] - unclipped.losses[kSteps - 1]),
            1e-4 * std::abs(unclipped.losses[kSteps - 1]));
}

INSTANTIATE_TEST_SUITE_P(Grids, ClipGradNorm,
                         testing::Values(ClipGrid{"dp1_pp2_tp1", 1, 2, 1, "1f1b"},
                                         ClipGrid{"dp2_pp2_tp1", 2, 2, 1, "1f1b"},
                                         ClipGrid{"dp1_pp2_tp2", 1, 2, 2, "1f1b"},
                                         ClipGrid{"dp2_pp2_tp2", 2, 2, 2, "1f1b"},
                                         ClipGrid{"pp2_chimera", 1, 2, 1, "chimera"},
                                         ClipGrid{"pp2_zbv", 1, 2, 1, "zb-v"}),
                         [](const testing::TestParamInfo<ClipGrid>& info) {
                           return std::string(info.param.name);
                         });

// Pipeline::clip_grad_norm, called between step() and the optimizer, clips
// as the scheduled action does; without clipping, last_step() has no norm.
TEST(ClipGradNormCall, ClipsAsTheScheduledActionDoes) {
  at::set_num_threads(1);
  constexpr double kMax = 0.1;
  const TiedRun reference = one_shared_parameter(kMax);
  std::vector<TiedRun> runs(2);
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    Pipeline pipe(tied_gpt(), nullptr, PipelineOptions().microbatches(2).pp(2).communicator(comm));
    torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(kLr));
    TiedRun& run = runs[comm.rank()];
    for (int step = 0; step < kSteps; ++step) {
      auto [x, y] = tokens(step);
      sgd.zero_grad();
      run.losses.push_back(pipe.step(x, y));
      EXPECT_TRUE(std::isnan(pipe.last_step().grad_norm));
      run.norms.push_back(pipe.clip_grad_norm(kMax));
      sgd.step();
    }
  });
  for (int r = 0; r < 2; ++r) {
    for (int step = 0; step < kSteps; ++step) {
      EXPECT_NEAR(runs[r].losses[step], reference.losses[step],
                  1e-5 * std::abs(reference.losses[step]));
      EXPECT_NEAR(runs[r].norms[step], reference.norms[step], 1e-5 * reference.norms[step]);
    }
  }
}

// A loss whose gradient is NaN (sqrt's slope at 0 times 0) while the loss
// itself is 0: every rank reports the same non-finite norm, which tells the
// caller to skip the update, and the clip leaves the gradients alone.
TEST(ClipGradNormCall, ANormThatIsNotFiniteReachesEveryRankAndScalesNothing) {
  at::set_num_threads(1);
  const runtime::LossFn nan_slope = [](const torch::Tensor& out, const torch::Tensor&) {
    return (out.sum() * 0).sqrt();
  };
  std::vector<double> norms(2), losses(2);
  comm::run_local_group(2, kTimeout, [&](comm::Communicator& comm) {
    Pipeline pipe(tied_gpt(), nan_slope,
                  PipelineOptions().microbatches(2).pp(2).clip_grad_norm(0.1).communicator(comm));
    auto [x, y] = tokens(0);
    losses[comm.rank()] = pipe.step(x, y);
    norms[comm.rank()] = pipe.last_step().grad_norm;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(losses[r], 0) << r;
    EXPECT_FALSE(std::isfinite(norms[r])) << "rank " << r << ": " << norms[r];
  }
}

TEST(ClipGradNormCall, RefusesBadValuesAndSchedulesWithoutAFlush) {
  const auto refused = [](const PipelineOptions& options, const std::string& expected) {
    try {
      Pipeline pipe(tied_gpt(), nullptr, options);
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    refused(PipelineOptions().clip_grad_norm(bad), "clip_grad_norm must be a finite norm");
  for (const char* schedule : {"2bw", "pipedream", "async", "pipemare"})
    refused(PipelineOptions().schedule(schedule).pp(1).clip_grad_norm(1), "has no flush");
  Pipeline pipe(tied_gpt(), nullptr, PipelineOptions().microbatches(2));
  EXPECT_THROW(pipe.clip_grad_norm(0), Error);
  EXPECT_THROW(pipe.clip_grad_norm(-2), Error);
}

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
