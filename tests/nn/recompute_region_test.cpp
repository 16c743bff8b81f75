// Selective recomputation (nn/recompute_region.h): a marked region gives the
// plain region's outputs and gradients bit for bit, and keeps only its
// inputs, which the counting allocator measures against the s^2 tensor the
// attention core no longer holds (Korthikanti et al. 2022's 5as/h term).
#include "baton/nn/recompute_region.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>
#include <optional>
#include <vector>

#include "baton/comm/memory_counter.h"
#include "baton/core/model_shapes.h"
#include "baton/nn/llama.h"
#include "baton/nn/models.h"
#include "baton/nn/transformer.h"
#include "baton/pipeline/pipeline.h"
#include "baton/runtime/precision.h"

namespace baton::nn {
namespace {

// The output and every parameter's and the input's gradient of `forward`
// on `x`, with selective recomputation on or off.
template <class Forward>
std::vector<torch::Tensor> run(torch::nn::Module& module, Forward forward, const torch::Tensor& x,
                               bool selective) {
  module.zero_grad();
  const torch::Tensor input = x.detach().clone().requires_grad_(true);
  torch::Tensor out;
  {
    const SelectiveRecomputeScope scope(selective);
    out = forward(input);
  }
  (out * out).sum().backward();
  std::vector<torch::Tensor> all{out.detach(),
                                 input.grad().defined() ? input.grad() : torch::Tensor()};
  for (const auto& p : module.parameters()) {
    all.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  }
  return all;
}

void expect_bitwise_equal(const std::vector<torch::Tensor>& a,
                          const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined()) << "plain: no tensor " << i;
    ASSERT_TRUE(b[i].defined()) << "region: no tensor " << i;
    EXPECT_TRUE(torch::equal(a[i], b[i])) << "tensor " << i << " differs";
  }
}

TEST(RecomputeRegionTest, GptBlockGivesTheSameOutputAndGradientsBitForBit) {
  torch::manual_seed(1);
  TransformerBlock block(32, 4);
  const auto x = torch::randn({3, 16, 32});
  auto forward = [&](const torch::Tensor& in) { return block->forward(in); };
  expect_bitwise_equal(run(*block, forward, x, false), run(*block, forward, x, true));
}

TEST(RecomputeRegionTest, LlamaBlockWithAPaddingMaskGivesTheSameBitForBit) {
  torch::manual_seed(2);
  LlamaBlock block(32, 4, llama_ffn_hidden(32));
  const auto x = torch::randn({2, 12, 32});
  auto mask = torch::ones({2, 12}, torch::kInt);
  mask.index_put_({1, torch::indexing::Slice(8)}, 0);
  const auto positions = torch::arange(12).expand({2, 12});
  auto forward = [&](const torch::Tensor& in) { return block->forward({in, positions, mask})[0]; };
  expect_bitwise_equal(run(*block, forward, x, false), run(*block, forward, x, true));
}

// The recomputation runs under the forward's autocast, not the backward's:
// in bf16 the gradients equal the plain region's too.
TEST(RecomputeRegionTest, UnderBf16AutocastTheRecomputationComputesAsTheForwardDid) {
  torch::manual_seed(3);
  TransformerBlock block(32, 4);
  const auto x = torch::randn({2, 8, 32});
  auto forward = [&](const torch::Tensor& in) {
    const runtime::AutocastScope autocast(runtime::Precision::Bf16, torch::kCPU);
    return block->forward(in);
  };
  expect_bitwise_equal(run(*block, forward, x, false), run(*block, forward, x, true));
}

// The zoo's gpt, layer by layer as a stage runs it, with its token loss:
// every parameter's gradient the same bit for bit.
TEST(RecomputeRegionTest, TheZoosGptGivesTheSameGradientsBitForBit) {
  const ModelSpec spec = gpt(2, 32, 4, 50, 16);
  std::vector<torch::nn::AnyModule> layers;
  for (int i = 0; i < spec.num_layers(); ++i) layers.push_back(build_layer(spec, i, 7));
  torch::manual_seed(8);
  const auto tokens = torch::randint(0, 50, {4, 16}, torch::kLong);
  auto grads = [&](bool selective) {
    std::vector<torch::Tensor> all;
    for (auto& layer : layers) layer.ptr()->zero_grad();
    torch::Tensor h;
    {
      const SelectiveRecomputeScope scope(selective);
      h = layers[0].forward(tokens);
      for (size_t i = 1; i < layers.size(); ++i) h = layers[i].forward(h);
    }
    spec.loss(h, tokens).backward();
    for (auto& layer : layers) {
      for (const auto& p : layer.ptr()->parameters()) all.push_back(p.grad().clone());
    }
    return all;
  };
  expect_bitwise_equal(grads(false), grads(true));
}

// The same model through a Pipeline (one rank, two micro-batches), as
// `baton train --recompute selective` runs it.
TEST(RecomputeRegionTest, APipelineGivesTheSameGradientsBitForBit) {
  const ModelSpec spec = gpt(2, 32, 4, 50, 16);
  torch::manual_seed(9);
  const auto tokens = torch::randint(0, 50, {4, 16}, torch::kLong);
  auto grads = [&](const char* mode) {
    Pipeline pipe(
        spec, {},
        PipelineOptions().rank_env(comm::RankEnv{}).microbatches(2).recompute(mode).seed(7));
    const double loss = pipe.step(tokens, tokens);
    std::vector<torch::Tensor> all{torch::tensor(loss)};
    for (const auto& p : pipe.parameters()) all.push_back(p.grad().clone());
    return all;
  };
  expect_bitwise_equal(grads("never"), grads("selective"));
}

// A region whose dtype autocast decides (a matmul of fp32 tensors computes
// in bf16 under it): recomputed without the forward's autocast, its
// gradients would come out of fp32 matmuls and differ.
TEST(RecomputeRegionTest, TheRecomputationRunsUnderTheForwardsAutocast) {
  torch::manual_seed(5);
  const auto a0 = torch::randn({8, 16}), b0 = torch::randn({16, 8});
  auto grads = [&](bool selective) {
    const auto a = a0.clone().requires_grad_(true), b = b0.clone().requires_grad_(true);
    torch::Tensor out;
    {
      const SelectiveRecomputeScope scope(selective);
      const runtime::AutocastScope autocast(runtime::Precision::Bf16, torch::kCPU);
      out = recomputed_region(
          [](const std::vector<torch::Tensor>& in) { return in[0].matmul(in[1]).tanh(); }, {a, b});
    }
    EXPECT_EQ(out.scalar_type(), torch::kBFloat16);
    (out.to(torch::kFloat) * torch::linspace(0, 1, 64).view({8, 8})).sum().backward();
    return std::vector<torch::Tensor>{out.detach(), a.grad(), b.grad()};
  };
  expect_bitwise_equal(grads(false), grads(true));
}

// What the graph holds after the forward, counted by the allocator: the
// region drops the attention probabilities, B * heads * T^2 floats, fc2
// the GELU's output, B * T * 4h floats, and every other tensor stays.
TEST(RecomputeRegionTest, TheGraphHoldsTheAttentionProbabilitiesLess) {
  comm::install_memory_counter();
  torch::manual_seed(4);
  const int64_t batch = 2, time = 64, hidden = 64, heads = 8;
  TransformerBlock block(hidden, heads);
  const auto x = torch::randn({batch, time, hidden}).requires_grad_(true);
  auto held = [&](bool selective) {
    const int64_t before = comm::memory_figures().current_bytes;
    const SelectiveRecomputeScope scope(selective);
    const torch::Tensor out = block->forward(x);
    return comm::memory_figures().current_bytes - before - out.numel() * 4;
  };
  const int64_t plain = held(false), region = held(true);
  const int64_t probabilities = batch * heads * time * time * 4;
  // fc2 keeps fc1's output (which the GELU's node kept anyway) in place of
  // the GELU's: 4h floats a token less.
  const int64_t gelu = batch * time * 4 * hidden * 4;
  // The bound's T^2 bytes once covered the causal mask a masked fill kept;
  // the additive bias the block now uses keeps none.
  EXPECT_GE(plain - region, probabilities + gelu);
  EXPECT_LE(plain - region, probabilities + gelu + time * time + 4096);
}

// A product region with distinct, strided inputs (as q, k, v are views of
// one projection): its outputs and all three gradients are the plain
// region's bit for bit, in fp32 and (recomputing the whole region) under
// bf16 autocast; the backward runs the probabilities once, not the product.
TEST(RecomputeRegionTest, AProductRegionDifferentiatesTheProductByHandBitForBit) {
  torch::manual_seed(6);
  const auto projected0 = torch::randn({2, 8, 3, 4, 16});  // [B, T, 3, heads, d]
  int calls = 0;
  const Region probabilities = [&calls](const std::vector<torch::Tensor>& in) {
    ++calls;
    return (in[0].matmul(in[1].transpose(-2, -1)) / 4.0).softmax(-1);
  };
  auto grads = [&](bool selective, bool autocast) {
    const auto projected = projected0.clone().requires_grad_(true);
    const auto heads = projected.permute({2, 0, 3, 1, 4});  // 3 x [B, heads, T, d]
    torch::Tensor out;
    {
      const SelectiveRecomputeScope scope(selective);
      std::optional<runtime::AutocastScope> cast;
      if (autocast) cast.emplace(runtime::Precision::Bf16, torch::kCPU);
      out = recomputed_product(probabilities, {heads[0], heads[1]}, heads[2]);
    }
    calls = 0;
    (out.to(torch::kFloat) * out.to(torch::kFloat)).sum().backward();
    EXPECT_EQ(calls, selective ? 1 : 0);
    return std::vector<torch::Tensor>{out.detach(), projected.grad()};
  };
  expect_bitwise_equal(grads(false, false), grads(true, false));
  expect_bitwise_equal(grads(false, true), grads(true, true));
}

// The causal bias gives the masked fill's probabilities bit for bit, and
// the same gradient wherever a key is seen (a masked key's is 0 either way).
TEST(RecomputeRegionTest, TheCausalBiasIsTheMaskedFillsValues) {
  torch::manual_seed(8);
  const int64_t time = 16;
  const auto scores0 = torch::randn({2, 3, time, time});
  const auto future = torch::ones({time, time}, torch::kBool).triu(/*diagonal=*/1);
  const auto weights = torch::randn({2, 3, time, time});
  auto probabilities = [&](bool bias) {
    const auto scores = scores0.clone().requires_grad_(true);
    const auto p =
        bias ? (scores + causal_bias(time, scores.options())).softmax(-1)
             : scores.masked_fill(future, -std::numeric_limits<double>::infinity()).softmax(-1);
    (p * weights).sum().backward();
    return std::vector<torch::Tensor>{p.detach(), scores.grad()};
  };
  const auto filled = probabilities(false), biased = probabilities(true);
  EXPECT_TRUE(torch::equal(filled[0], biased[0]));
  EXPECT_TRUE(torch::equal(filled[1], biased[1]));
  EXPECT_EQ(filled[0].masked_select(future.expand({2, 3, time, time})).abs().max().item<float>(),
            0);
}

TEST(RecomputeRegionTest, OffOrWithoutGradientsTheRegionRunsAsWritten) {
  const auto q = torch::randn({1, 2, 4, 8}, torch::requires_grad());
  const auto out = causal_attention_core(q, q, q);
  EXPECT_FALSE(selective_recompute_on());
  EXPECT_THAT(out.grad_fn()->name(), testing::Not(testing::HasSubstr("ProductFunction")));
  const SelectiveRecomputeScope scope(true);
  EXPECT_TRUE(selective_recompute_on());
  EXPECT_THAT(causal_attention_core(q, q, q).grad_fn()->name(),
              testing::HasSubstr("ProductFunction"));
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(causal_attention_core(q, q, q).requires_grad());
}

}  // namespace
}  // namespace baton::nn
