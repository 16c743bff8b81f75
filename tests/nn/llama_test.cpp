// The llama zoo model (nn/llama.h): shapes and what crosses its boundaries,
// RMSNorm and rotary embeddings against their formulas written out element by
// element, causality, the padding mask, tied embeddings, the parameter count,
// and the split backward.
#include "baton/nn/llama.h"
#include "baton/plan/model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "baton/core/error.h"
#include "baton/nn/models.h"

namespace baton::nn {
namespace {

// The layers of `model` called in order on `input`: the logits.
torch::Tensor run(torch::nn::Sequential& model, const Tensors& input) {
  auto layer = model->begin();
  Tensors h = layer->forward<Tensors>(input);
  for (++layer; layer + 1 != model->end(); ++layer) h = layer->forward<Tensors>(h);
  return layer->forward<torch::Tensor>(h);
}

TEST(LlamaTest, MapsTokensToLogitsWithPositionsAndTheMaskCrossingEveryBlock) {
  const ModelSpec spec = llama(3, 32, 4, 50);
  ASSERT_EQ(spec.num_layers(), 5);
  const auto tokens = torch::randint(0, 50, {2, 10}, torch::kLong);
  const Tensors embedded = build_layer(spec, 0, 0).forward<Tensors>(Tensors{tokens});
  ASSERT_EQ(embedded.size(), 2u);
  EXPECT_EQ(embedded[0].sizes(), (std::vector<int64_t>{2, 10, 32}));
  EXPECT_EQ(embedded[1].scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(embedded[1], torch::arange(10).expand({2, 10})));

  const auto mask = torch::ones({2, 10}, torch::kInt);
  const Tensors block =
      build_layer(spec, 1, 0)
          .forward<Tensors>(build_layer(spec, 0, 0).forward<Tensors>(Tensors{tokens, mask}));
  ASSERT_EQ(block.size(), 3u);
  EXPECT_EQ(block[0].sizes(), (std::vector<int64_t>{2, 10, 32}));
  EXPECT_TRUE(torch::equal(block[1], embedded[1]));
  EXPECT_EQ(block[2].scalar_type(), torch::kBool);

  auto model = build_sequential(spec, 0);
  EXPECT_EQ(run(model, {tokens}).sizes(), (std::vector<int64_t>{2, 10, 50}));
  // An all-true mask changes nothing.
  EXPECT_TRUE(torch::allclose(run(model, {tokens}), run(model, {tokens, mask})));
}

TEST(LlamaTest, ParameterCountIsTheBuiltModels) {
  const ModelOptions options = ModelOptions().layers(2).hidden(32).heads(4).vocab(50);
  auto model = build_sequential(make_model("llama", options), 0);
  int64_t built = 0;
  for (const auto& p : model->parameters()) built += p.numel();
  EXPECT_EQ(parameter_count("llama", options), static_cast<double>(built));
  EXPECT_EQ(plan::llama_ffn_hidden(32), 256);      // 85 rounded up to 256
  EXPECT_EQ(plan::llama_ffn_hidden(1024), 2816);   // 2730 rounded up, as Llama
  EXPECT_EQ(plan::llama_ffn_hidden(4096), 11008);  // Llama 7B
}

TEST(LlamaTest, EveryLayerDependsOnlyOnTheSeedAndItsIndex) {
  const ModelSpec spec = llama(2, 16, 2, 20);
  for (int i = 0; i < spec.num_layers(); ++i) {
    const auto first = build_layer(spec, i, 42).ptr()->named_parameters();
    torch::manual_seed(i);
    torch::randn({17});  // unrelated draws between builds must not matter
    build_layer(spec, spec.num_layers() - 1 - i, 42);  // and another layer in between
    const auto second = build_layer(spec, i, 42).ptr()->named_parameters();
    ASSERT_EQ(first.size(), second.size()) << "layer " << i;
    for (const auto& item : first) {
      EXPECT_TRUE(torch::equal(item.value(), second[item.key()]))
          << "layer " << i << " " << item.key();
    }
  }
}

TEST(LlamaTest, RmsNormIsItsFormula) {
  RmsNorm norm(6);
  {
    torch::NoGradGuard no_grad;
    norm->weight.copy_(torch::randn({6}));
  }
  const auto x = torch::randn({3, 4, 6}, torch::kDouble);
  const auto w = norm->weight.to(torch::kDouble);
  auto want = torch::empty_like(x);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) {
      double squares = 0;
      for (int64_t e = 0; e < 6; ++e) squares += std::pow(x[i][j][e].item<double>(), 2);
      const double scale = 1 / std::sqrt(squares / 6 + 1e-5);
      for (int64_t e = 0; e < 6; ++e)
        want[i][j][e] = x[i][j][e].item<double>() * scale * w[e].item<double>();
    }
  }
  const auto got = norm(x.to(torch::kFloat));
  EXPECT_TRUE(torch::allclose(got.to(torch::kDouble), want, 1e-5, 1e-6));
}

TEST(LlamaTest, RotaryTurnsEachPairByPositionTimesItsFrequency) {
  constexpr int64_t kBatch = 2, kHeads = 3, kTime = 5, kDim = 8, kHalf = kDim / 2;
  const auto x = torch::randn({kBatch, kHeads, kTime, kDim});
  const auto positions = torch::randint(0, 100, {kBatch, kTime}, torch::kLong);
  const auto got = apply_rotary(x, positions);
  ASSERT_EQ(got.sizes(), x.sizes());
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t h = 0; h < kHeads; ++h) {
      for (int64_t t = 0; t < kTime; ++t) {
        for (int64_t i = 0; i < kHalf; ++i) {
          const double angle = positions[b][t].item<double>() *
                               std::pow(10000.0, -2.0 * static_cast<double>(i) / kDim);
          const double a = x[b][h][t][i].item<double>(), c = x[b][h][t][i + kHalf].item<double>();
          EXPECT_NEAR(got[b][h][t][i].item<double>(), a * std::cos(angle) - c * std::sin(angle),
                      1e-4);
          EXPECT_NEAR(got[b][h][t][i + kHalf].item<double>(),
                      c * std::cos(angle) + a * std::sin(angle), 1e-4);
        }
      }
    }
  }
}

TEST(LlamaTest, RotaryScoresDependOnlyOnTheDistanceBetweenPositions) {
  const auto q = torch::randn({1, 1, 1, 16}, torch::kDouble);
  const auto k = torch::randn({1, 1, 1, 16}, torch::kDouble);
  auto score = [&](int64_t m, int64_t n) {
    const auto at = [](int64_t p) { return torch::full({1, 1}, p, torch::kLong); };
    return (apply_rotary(q, at(m)) * apply_rotary(k, at(n))).sum().item<double>();
  };
  EXPECT_NEAR(score(7, 3), score(20, 16), 1e-5);  // the angles are computed in fp32
  EXPECT_NEAR(score(0, 0), (q * k).sum().item<double>(), 1e-12);
  EXPECT_GT(std::abs(score(7, 3) - score(7, 4)), 1e-6);
}

TEST(LlamaTest, IsCausal) {
  auto model = build_sequential(llama(2, 16, 2, 20), 3);
  auto tokens = torch::randint(0, 20, {1, 8}, torch::kLong);
  const auto before = run(model, {tokens});
  tokens[0][5] = (tokens[0][5].item<int64_t>() + 1) % 20;
  const auto after = run(model, {tokens});
  EXPECT_TRUE(torch::allclose(before.slice(1, 0, 5), after.slice(1, 0, 5)));
  EXPECT_FALSE(torch::allclose(before.slice(1, 5), after.slice(1, 5)));
}

TEST(LlamaTest, APaddedTokenIsSeenByNoOtherPosition) {
  auto model = build_sequential(llama(2, 16, 2, 20), 4);
  auto tokens = torch::randint(0, 20, {1, 8}, torch::kLong);
  auto mask = torch::ones({1, 8}, torch::kBool);
  mask[0][2] = false;
  const auto masked = run(model, {tokens, mask});
  const auto open = run(model, {tokens});
  tokens[0][2] = (tokens[0][2].item<int64_t>() + 1) % 20;
  const auto masked_after = run(model, {tokens, mask});
  const auto open_after = run(model, {tokens});
  EXPECT_TRUE(torch::allclose(masked.slice(1, 3), masked_after.slice(1, 3)));
  EXPECT_FALSE(torch::allclose(open.slice(1, 3), open_after.slice(1, 3)));
  // The padded position still sees itself: its output is finite.
  EXPECT_TRUE(torch::isfinite(masked_after).all().item<bool>());
}

TEST(LlamaTest, TiedEmbeddingsStartTheHeadFromTheTokenEmbedding) {
  const ModelSpec spec = make_model(
      "llama", ModelOptions().layers(2).hidden(16).heads(2).vocab(20).tie_embeddings(true));
  ASSERT_EQ(spec.tied.size(), 1u);
  const auto token = build_layer(spec, 0, 9).ptr()->named_parameters()["token.weight"];
  const auto head = build_layer(spec, 3, 9).ptr()->named_parameters()["head.weight"];
  EXPECT_TRUE(torch::equal(token, head));
}

TEST(LlamaTest, InputThenWeightBackwardEqualsFullBackward) {
  const ModelSpec spec = llama(2, 16, 2, 20);
  auto full = build_sequential(spec, 1);
  auto split = build_sequential(spec, 1);
  const auto tokens = torch::randint(0, 20, {2, 8}, torch::kLong);
  const auto targets = torch::randint(0, 20, {2, 8}, torch::kLong);
  spec.loss(run(full, {tokens}), targets).backward();
  {
    DeferWeightGradScope defer(*split);
    spec.loss(run(split, {tokens}), targets).backward();
  }
  EXPECT_EQ(run_deferred_weight_backward(*split), 2 * 7 + 1);
  const auto want = full->named_parameters();
  for (const auto& item : split->named_parameters()) {
    EXPECT_TRUE(torch::allclose(want[item.key()].grad(), item.value().grad(), 1e-6, 1e-6))
        << item.key();
  }
}

TEST(LlamaTest, BadSizesAndInputsAreRefusedByName) {
  EXPECT_THAT([] { llama(1, 10, 3, 20); },
              testing::ThrowsMessage<baton::Error>(testing::HasSubstr("multiple of heads")));
  EXPECT_THAT([] { llama(1, 12, 4, 20); },  // head dimension 3 is odd
              testing::ThrowsMessage<baton::Error>(testing::HasSubstr("even head dimension")));
  LlamaBlock block(16, 2, 64);
  EXPECT_THAT(
      [&] {
        block(Tensors{torch::randn({1, 4, 16})});
      },
      testing::ThrowsMessage<baton::Error>(
          testing::HasSubstr("[nn.LlamaBlock] takes {hidden, positions}")));
}

}  // namespace
}  // namespace baton::nn
