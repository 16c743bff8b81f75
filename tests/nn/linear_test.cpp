#include "baton/nn/linear.h"

#include "baton/core/error.h"
#include "baton/nn/chain.h"
#include "baton/nn/recompute_region.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <tuple>

namespace baton::nn {
namespace {

constexpr double kTolerance = 1e-6;

torch::nn::Sequential make_mlp() {
  torch::manual_seed(7);
  return torch::nn::Sequential(Linear(6, 16), torch::nn::ReLU(), Linear(16, 16), torch::nn::ReLU(),
                               Linear(16, 3));
}

// A copy with the same weights and no shared state.
torch::nn::Sequential copy_of(const torch::nn::Sequential& model) {
  return std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone());
}

torch::Tensor loss_of(torch::nn::Sequential& model, const torch::Tensor& input) {
  return model->forward(input).pow(2).mean();
}

void expect_same_grads(const torch::nn::Module& expected, const torch::nn::Module& actual) {
  const auto want = expected.named_parameters();
  const auto got = actual.named_parameters();
  ASSERT_EQ(want.size(), got.size());
  for (const auto& item : want) {
    const torch::Tensor& grad = got[item.key()].grad();
    ASSERT_TRUE(grad.defined()) << item.key();
    EXPECT_TRUE(torch::allclose(item.value().grad(), grad, kTolerance, kTolerance))
        << item.key() << " differs by " << (item.value().grad() - grad).abs().max().item<double>();
  }
}

TEST(LinearTest, InitializesLikeTorchLinearUnderTheSameSeed) {
  torch::manual_seed(3);
  torch::nn::Linear reference(5, 4);
  torch::manual_seed(3);
  Linear linear(5, 4);
  EXPECT_TRUE(torch::equal(reference->weight, linear->weight));
  EXPECT_TRUE(torch::equal(reference->bias, linear->bias));
}

TEST(LinearTest, GradientsEqualTorchLinearWithTheSameWeights) {
  torch::manual_seed(3);
  Linear linear(5, 4);
  torch::nn::Linear reference(5, 4);
  {
    torch::NoGradGuard no_grad;
    reference->weight.copy_(linear->weight);
    reference->bias.copy_(linear->bias);
  }
  const auto input = torch::randn({7, 5}, torch::requires_grad());
  const auto input_ref = input.detach().clone().requires_grad_();
  const auto output = linear(input);
  const auto output_ref = reference(input_ref);
  EXPECT_TRUE(torch::allclose(output, output_ref, kTolerance, kTolerance));
  output.sin().sum().backward();
  output_ref.sin().sum().backward();
  EXPECT_TRUE(torch::allclose(input.grad(), input_ref.grad(), kTolerance, kTolerance));
  EXPECT_TRUE(
      torch::allclose(linear->weight.grad(), reference->weight.grad(), kTolerance, kTolerance));
  EXPECT_TRUE(torch::allclose(linear->bias.grad(), reference->bias.grad(), kTolerance, kTolerance));
}

// The layer's own autograd node keeps what torch::nn::Linear's gives: a
// gradient asked for the input alone leaves the weight's alone; a frozen layer
// or no-grad mode records nothing; an input changed in place after the forward
// is caught; inputs with leading dimensions and no bias get torch's gradients.
TEST(LinearTest, AutogradNodeBehavesLikeTorchLinears) {
  torch::manual_seed(5);
  Linear linear(torch::nn::LinearOptions(5, 4).bias(false));
  const auto input = torch::randn({2, 3, 5}, torch::requires_grad());
  const auto input_grad =
      torch::autograd::grad({linear(input).sum()}, {input}, {}, /*retain_graph=*/false);
  EXPECT_FALSE(linear->weight.grad().defined());
  EXPECT_TRUE(torch::allclose(input_grad[0], linear->weight.sum(0).expand({2, 3, 5}), kTolerance,
                              kTolerance));

  const auto reference_input = input.detach().clone().requires_grad_();
  const auto output = linear(input);
  ASSERT_EQ(output.sizes(), (std::vector<int64_t>{2, 3, 4}));
  const auto reference = torch::nn::functional::linear(reference_input, linear->weight);
  EXPECT_TRUE(torch::allclose(output, reference, kTolerance, kTolerance));
  output.sin().sum().backward();
  const auto weight_grad = linear->weight.grad().clone();
  linear->weight.mutable_grad().zero_();
  reference.sin().sum().backward();  // autograd's AccumulateGrad, into the same weight.grad
  EXPECT_TRUE(torch::allclose(input.grad(), reference_input.grad(), kTolerance, kTolerance));
  EXPECT_TRUE(torch::allclose(weight_grad, linear->weight.grad(), kTolerance, kTolerance));

  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(linear(input).requires_grad());
  }
  linear->weight.requires_grad_(false);
  EXPECT_FALSE(linear(input.detach()).requires_grad());
  linear->weight.requires_grad_(true);

  const auto changed = torch::randn({3, 5}, torch::requires_grad());
  const auto leaf_copy = changed * 1;
  const auto out = linear(leaf_copy);
  {
    torch::NoGradGuard no_grad;
    leaf_copy.add_(1);
  }
  EXPECT_THROW(out.sum().backward(), c10::Error);
}

// Each optimizer, one step at a time, trains baton's Linear as it trains
// torch::nn::Linear: every forward sees the weights the last step left.
// (LibTorch 1.13's SGD updates through .data(), which leaves the version
// counter alone: a W^T cached by version went stale and SGD never moved
// what the layer computed.)
TEST(LinearTest, EveryOptimizerStepChangesTheOutputAsForTorchLinear) {
  for (const std::string kind : {"sgd", "adam"}) {
    torch::manual_seed(3);
    Linear linear(5, 4);
    torch::manual_seed(3);
    torch::nn::Linear reference(5, 4);
    auto make = [&](std::vector<torch::Tensor> params) -> std::unique_ptr<torch::optim::Optimizer> {
      if (kind == "sgd")
        return std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(0.5));
      return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(0.1));
    };
    auto opt = make(linear->parameters());
    auto opt_ref = make(reference->parameters());
    const auto input = torch::randn({7, 5});
    torch::Tensor first;
    for (int step = 0; step < 3; ++step) {
      opt->zero_grad();
      opt_ref->zero_grad();
      const auto output = linear(input);
      const auto output_ref = reference(input);
      ASSERT_TRUE(torch::allclose(output, output_ref, kTolerance, kTolerance))
          << kind << " step " << step << " differs by "
          << (output - output_ref).abs().max().item<double>();
      if (step == 0) first = output.detach().clone();
      if (step > 0) {
        EXPECT_FALSE(torch::allclose(output, first)) << kind << ": the step changed nothing";
      }
      output.pow(2).sum().backward();
      output_ref.pow(2).sum().backward();
      opt->step();
      opt_ref->step();
    }
  }
}

TEST(LinearTest, InputThenWeightBackwardEqualsOneFullBackward) {
  auto full = make_mlp();
  auto split = copy_of(full);
  const auto input = torch::randn({8, 6});

  loss_of(full, input).backward();

  {
    DeferWeightGradScope defer(*split);
    loss_of(split, input).backward();
  }
  for (const auto& parameter : split->parameters()) {
    EXPECT_FALSE(parameter.grad().defined()) << "I must not produce weight gradients";
  }
  EXPECT_EQ(pending_deferred_weight_backwards(*split), 3);
  EXPECT_EQ(run_deferred_weight_backward(*split), 3);
  EXPECT_EQ(pending_deferred_weight_backwards(*split), 0);
  expect_same_grads(*full, *split);
}

TEST(LinearTest, InputGradientIsComputedDuringTheInputPass) {
  auto full = make_mlp();
  auto split = copy_of(full);
  const auto input = torch::randn({8, 6}, torch::requires_grad());
  const auto input_split = input.detach().clone().requires_grad_();
  loss_of(full, input).backward();
  {
    DeferWeightGradScope defer(*split);
    loss_of(split, input_split).backward();
  }
  ASSERT_TRUE(input_split.grad().defined());
  EXPECT_TRUE(torch::allclose(input.grad(), input_split.grad(), kTolerance, kTolerance));
}

// (micro-batches, whether W runs in the reverse order of I)
class DeferredMicrobatchTest : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(DeferredMicrobatchTest, AccumulatesLikeFullBackwardsOneMicrobatchAtATime) {
  const auto [microbatch_count, reverse] = GetParam();
  auto full = make_mlp();
  auto split = copy_of(full);
  const auto input = torch::randn({4 * microbatch_count, 6});
  const auto microbatches = input.chunk(microbatch_count);

  for (const auto& microbatch : microbatches) {
    (loss_of(full, microbatch) / microbatch_count).backward();
  }
  for (int64_t key = 0; key < microbatch_count; ++key) {
    DeferWeightGradScope defer(*split, key);
    (loss_of(split, microbatches[static_cast<size_t>(key)]) / microbatch_count).backward();
  }
  EXPECT_EQ(pending_deferred_weight_backwards(*split), 3 * microbatch_count);
  for (int64_t step = 0; step < microbatch_count; ++step) {
    const int64_t key = reverse ? microbatch_count - 1 - step : step;
    EXPECT_EQ(run_deferred_weight_backward(*split, key), 3) << "micro-batch " << key;
    EXPECT_EQ(pending_deferred_weight_backwards(*split), 3 * (microbatch_count - 1 - step));
  }
  expect_same_grads(*full, *split);
}

INSTANTIATE_TEST_SUITE_P(MicrobatchesAndOrder, DeferredMicrobatchTest,
                         ::testing::Combine(::testing::Values<int64_t>(1, 2, 3, 8),
                                            ::testing::Bool()));

TEST(LinearTest, WeightBackwardAddsToExistingGradients) {
  auto full = make_mlp();
  auto split = copy_of(full);
  const auto first = torch::randn({4, 6});
  const auto second = torch::randn({4, 6});
  loss_of(full, first).backward();
  loss_of(full, second).backward();
  loss_of(split, first).backward();  // plain backward leaves gradients in place
  {
    DeferWeightGradScope defer(*split);
    loss_of(split, second).backward();
  }
  run_deferred_weight_backward(*split);
  expect_same_grads(*full, *split);
}

TEST(LinearTest, DefersForInputsWithLeadingDimensionsAndWithoutBias) {
  torch::manual_seed(5);
  Linear full(torch::nn::LinearOptions(4, 5).bias(false));
  Linear split(torch::nn::LinearOptions(4, 5).bias(false));
  {
    torch::NoGradGuard no_grad;
    split->weight.copy_(full->weight);
  }
  const auto input = torch::randn({2, 3, 4});
  full(input).tanh().sum().backward();
  split->set_defer_weight_grad(true);
  split(input).tanh().sum().backward();
  split->set_defer_weight_grad(false);
  EXPECT_EQ(split->pending_weight_backwards(), 1);
  EXPECT_EQ(split->run_weight_backward(), 1);
  EXPECT_TRUE(torch::allclose(full->weight.grad(), split->weight.grad(), kTolerance, kTolerance));
  EXPECT_FALSE(split->bias.defined());
}

TEST(LinearTest, NothingIsStashedWhenDeferralIsOff) {
  auto model = make_mlp();
  loss_of(model, torch::randn({3, 6})).backward();
  EXPECT_EQ(pending_deferred_weight_backwards(*model), 0);
  EXPECT_EQ(run_deferred_weight_backward(*model), 0);
}

TEST(LinearTest, ScopeTurnsDeferralOffWhenItEnds) {
  auto model = make_mlp();
  {
    DeferWeightGradScope defer(*model, 4);
    EXPECT_TRUE(model->ptr<LinearImpl>(0)->defer_weight_grad());
  }
  EXPECT_FALSE(model->ptr<LinearImpl>(0)->defer_weight_grad());
}

TEST(LinearTest, OnlyTreesWithABatonLinearSupportDeferral) {
  EXPECT_TRUE(supports_deferred_weight_grad(*make_mlp()));
  Chain chain;
  chain->push_back(Linear(2, 2));
  EXPECT_TRUE(supports_deferred_weight_grad(*chain));
  EXPECT_FALSE(supports_deferred_weight_grad(*torch::nn::Linear(2, 2)));
  EXPECT_FALSE(supports_deferred_weight_grad(*torch::nn::Conv2d(1, 1, 3)));
}

TEST(LinearTest, CloneHasItsOwnStash) {
  Linear original(3, 2);
  auto clone = std::dynamic_pointer_cast<LinearImpl>(original->clone());
  clone->set_defer_weight_grad(true);
  EXPECT_FALSE(original->defer_weight_grad());
  EXPECT_TRUE(torch::equal(original->weight, clone->weight));
}

// forward_gelu under selective recomputation keeps the GELU's input and runs
// it again in the backward: the output, the input's gradient and the weight
// gradients are torch::gelu then forward's bit for bit, with the weight
// gradients deferred to a W pass as well; without selective recomputation
// (or without a graph) it is that composition as written.
TEST(LinearTest, ForwardGeluRecomputesTheGeluAndGivesThePlainGradientsBitForBit) {
  torch::manual_seed(11);
  Linear plain(16, 5);
  const auto pre0 = torch::randn({3, 4, 16});
  auto run = [&](Linear& layer, bool selective, bool defer) {
    layer->zero_grad();
    const torch::Tensor pre = pre0.clone().requires_grad_(true);
    torch::Tensor out;
    {
      const SelectiveRecomputeScope scope(selective);
      out = layer->forward_gelu(pre);
    }
    layer->set_defer_weight_grad(defer, 0);
    (out * out).sum().backward();
    layer->set_defer_weight_grad(false, 0);
    EXPECT_EQ(layer->run_weight_backward(0), defer ? 1 : 0);
    return std::vector<torch::Tensor>{out.detach(), pre.grad(), layer->weight.grad().clone(),
                                      layer->bias.grad().clone()};
  };
  const auto want = run(plain, false, false);
  // The same layer, so that the weights are the same tensors.
  const std::vector<std::vector<torch::Tensor>> got = {run(plain, true, false),
                                                       run(plain, true, true)};
  for (const auto& g : got) {
    ASSERT_EQ(g.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(g[i].defined()) << i;
      EXPECT_TRUE(torch::equal(want[i], g[i])) << "tensor " << i << " differs";
    }
  }
  // As written: the same values as gelu then forward.
  {
    torch::NoGradGuard no_grad;
    const SelectiveRecomputeScope scope(true);
    EXPECT_TRUE(torch::equal(plain->forward_gelu(pre0), plain->forward(torch::gelu(pre0))));
  }
}

TEST(LinearTest, RejectsAnInputOfTheWrongWidth) {
  Linear linear(3, 2);
  try {
    linear(torch::randn({4, 5}));
    FAIL() << "expected baton::Error";
  } catch (const baton::Error& error) {
    EXPECT_STREQ(error.what(),
                 "[nn.Linear] input's last dimension must be in_features 3: got shape [4, 5]");
  }
}

}  // namespace
}  // namespace baton::nn
