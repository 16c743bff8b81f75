#include "baton/nn/models.h"

#include "baton/core/error.h"
#include "baton/nn/linear.h"
#include "baton/nn/resnet.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

namespace baton::nn {
namespace {

using ParameterMap = std::map<std::string, torch::Tensor>;

ParameterMap parameters_of(const torch::nn::AnyModule& layer) {
  ParameterMap parameters;
  for (const auto& item : layer.ptr()->named_parameters()) {
    parameters[item.key()] = item.value();
  }
  return parameters;
}

void expect_equal_parameters(const ParameterMap& a, const ParameterMap& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, value] : a) {
    ASSERT_EQ(b.count(name), 1u) << name;
    EXPECT_TRUE(torch::equal(value, b.at(name))) << name;
  }
}

std::vector<ModelSpec> all_models() {
  return {mlp(4, 16, 8, 3), fashion_cnn(), gpt(2, 16, 2, 32, 8), resnet(4, 4)};
}

TEST(ModelsTest, SameSeedAndIndexGiveIdenticalParametersWhateverTheBuildOrder) {
  for (const ModelSpec& spec : all_models()) {
    std::vector<ParameterMap> forward_order;
    for (int i = 0; i < spec.num_layers(); ++i) {
      forward_order.push_back(parameters_of(build_layer(spec, i, 42)));
    }
    torch::manual_seed(999);
    for (int i = spec.num_layers() - 1; i >= 0; --i) {
      torch::randn({17});  // unrelated draws between builds must not matter
      SCOPED_TRACE(spec.name + " layer " + std::to_string(i));
      expect_equal_parameters(forward_order[static_cast<size_t>(i)],
                              parameters_of(build_layer(spec, i, 42)));
    }
  }
}

TEST(ModelsTest, BuildingALayerLeavesTheDefaultGeneratorAsItWas) {
  torch::manual_seed(11);
  const auto expected = torch::rand({5});
  torch::manual_seed(11);
  build_layer(fashion_cnn(), 0, 1);
  EXPECT_TRUE(torch::equal(expected, torch::rand({5})));
}

TEST(ModelsTest, DifferentIndicesOrSeedsGiveDifferentParameters) {
  const ModelSpec spec = mlp(4, 16, 16, 16);  // every layer 16 -> 16
  const auto layer1 = parameters_of(build_layer(spec, 1, 42));
  const auto layer2 = parameters_of(build_layer(spec, 2, 42));
  const auto other_seed = parameters_of(build_layer(spec, 1, 43));
  for (const auto& [name, value] : layer1) {
    EXPECT_FALSE(torch::equal(value, layer2.at(name))) << name;
    EXPECT_FALSE(torch::equal(value, other_seed.at(name))) << name;
  }
}

TEST(ModelsTest, MlpMapsFeaturesToClassLogits) {
  const ModelSpec spec = mlp(3, 32, 20, 5);
  ASSERT_EQ(spec.num_layers(), 3);
  auto model = build_sequential(spec, 0);
  EXPECT_EQ(model->forward(torch::randn({7, 20})).sizes(), (std::vector<int64_t>{7, 5}));
  EXPECT_TRUE(supports_deferred_weight_grad(*model));
}

TEST(ModelsTest, FashionCnnMapsImagesToTenLogitsInSixLayers) {
  const ModelSpec spec = fashion_cnn();
  ASSERT_EQ(spec.num_layers(), 6);
  auto model = build_sequential(spec, 0);
  EXPECT_EQ(model->forward(torch::randn({4, 1, 28, 28})).sizes(), (std::vector<int64_t>{4, 10}));
}

TEST(ModelsTest, GptMapsTokensToLogitsForEveryPosition) {
  const ModelSpec spec = gpt(3, 32, 4, 50, 16);
  ASSERT_EQ(spec.num_layers(), 5);
  auto model = build_sequential(spec, 0);
  const auto tokens = torch::randint(0, 50, {2, 10}, torch::kLong);
  const auto hidden = build_layer(spec, 0, 0).forward(tokens);
  EXPECT_EQ(hidden.sizes(), (std::vector<int64_t>{2, 10, 32}));
  EXPECT_EQ(model->forward(tokens).sizes(), (std::vector<int64_t>{2, 10, 50}));
}

TEST(ModelsTest, ResnetStemBlocksAndHeadGiveTheStagesShapes) {
  // The stem pools to 14 pixels; 4 blocks in stages of 1, 1, 2 at 14, 7 and
  // 4 pixels, widths 4, 8, 16.
  const ModelSpec spec = resnet(4, 4);
  ASSERT_EQ(spec.num_layers(), 6);
  const std::vector<std::vector<int64_t>> want = {{3, 4, 14, 14}, {3, 16, 14, 14}, {3, 32, 7, 7},
                                                  {3, 64, 4, 4},  {3, 64, 4, 4},   {3, 10}};
  auto x = torch::randn({3, 1, 28, 28});
  for (int i = 0; i < spec.num_layers(); ++i) {
    x = build_layer(spec, i, 0).forward(x);
    EXPECT_EQ(x.sizes(), want[static_cast<size_t>(i)]) << spec.layers[static_cast<size_t>(i)].name;
  }
  EXPECT_EQ(spec.layers[1].name, "block0");
  EXPECT_EQ(spec.layers[5].name, "head");
  EXPECT_EQ(resnet(1, 4).num_layers(), 3);
  EXPECT_EQ(build_sequential(resnet(1, 4), 0)->forward(torch::randn({2, 1, 28, 28})).sizes(),
            (std::vector<int64_t>{2, 10}));
}

TEST(ModelsTest, ResnetParameterCountMatchesTheBlocksFormula) {
  // resnet(4, 4) by hand: a conv k x k in -> out holds in * out * k^2 weights
  // (no bias), a norm 2 * out. Stem 1 -> 4: 36 + 8.
  // Stage 0, 4 -> 16, projected: 1x1 4->4 (16 + 8), 3x3 4->4 (144 + 8),
  //   1x1 4->16 (64 + 32), shortcut 4->16 (64 + 32): 368.
  // Stage 1, 16 -> 32, strided: 128 + 16, 576 + 16, 256 + 64, 512 + 64: 1632.
  // Stage 2, 32 -> 64: 512 + 32, 2304 + 32, 1024 + 128, 2048 + 128: 6208;
  //   then 64 -> 64, identity: 1024 + 32, 2304 + 32, 1024 + 128: 4544.
  // Head: Linear(64, 10): 650.
  const double by_hand = 44 + 368 + 1632 + 6208 + 4544 + 650;
  EXPECT_EQ(parameter_count("resnet", ModelOptions().layers(4).hidden(4)), by_hand);
  for (const auto& [blocks, width] : std::vector<std::pair<int, int>>{{4, 4}, {1, 8}, {7, 6}}) {
    const ModelSpec spec = resnet(blocks, width);
    double built = 0;
    for (int i = 0; i < spec.num_layers(); ++i) {
      for (const auto& p : build_layer(spec, i, 0).ptr()->parameters()) built += p.numel();
    }
    EXPECT_EQ(parameter_count("resnet", ModelOptions().layers(blocks).hidden(width)), built)
        << blocks << " blocks, width " << width;
  }
}

TEST(ModelsTest, ResnetLayerWeightsDoNotDependOnThePartition) {
  const ModelSpec spec = resnet(5, 4);
  auto whole = build_sequential(spec, 7);
  auto stage = build_sequential(spec, 7, 3, 5);  // layers 3 and 4 only
  for (const auto& item : stage->named_parameters()) {
    ASSERT_TRUE(whole->named_parameters().contains(item.key())) << item.key();
    EXPECT_TRUE(torch::equal(item.value(), whole->named_parameters()[item.key()])) << item.key();
  }
  EXPECT_EQ(stage->named_parameters().size(),
            whole->ptr(3)->named_parameters().size() + whole->ptr(4)->named_parameters().size());
}

TEST(ModelsTest, ResnetOutputsOfASampleDoNotDependOnTheRestOfTheBatch) {
  // GroupNorm normalises each sample alone, so a micro-batch computes what
  // the whole batch computes for its samples (BatchNorm would not).
  auto model = build_sequential(resnet(3, 4), 2);
  const auto images = torch::rand({6, 1, 28, 28});
  const auto whole = model->forward(images);
  EXPECT_TRUE(
      torch::allclose(whole.slice(0, 0, 2), model->forward(images.slice(0, 0, 2)), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(whole.slice(0, 2), model->forward(images.slice(0, 2)), 1e-5, 1e-6));
}

TEST(ModelsTest, ResnetNormGroupsAreAtMost32OfAtLeastFourChannels) {
  EXPECT_EQ(resnet_norm_groups(4), 1);
  EXPECT_EQ(resnet_norm_groups(16), 4);
  EXPECT_EQ(resnet_norm_groups(24), 6);
  EXPECT_EQ(resnet_norm_groups(256), 32);
  EXPECT_EQ(resnet_norm_groups(132), 22);  // 33 would pass 32; 22 divides 132
  EXPECT_EQ(resnet_norm_groups(3), 1);
}

TEST(ModelsTest, GptIsCausal) {
  auto model = build_sequential(gpt(2, 16, 2, 20, 8), 3);
  auto tokens = torch::randint(0, 20, {1, 8}, torch::kLong);
  const auto before = model->forward(tokens);
  tokens[0][5] = (tokens[0][5].item<int64_t>() + 1) % 20;
  const auto after = model->forward(tokens);
  EXPECT_TRUE(torch::allclose(before.slice(1, 0, 5), after.slice(1, 0, 5)));
  EXPECT_FALSE(torch::allclose(before.slice(1, 5), after.slice(1, 5)));
}

TEST(ModelsTest, GptRejectsSequencesLongerThanTheContext) {
  auto embedding = build_layer(gpt(1, 16, 2, 20, 8), 0, 0);
  EXPECT_THROW(embedding.forward(torch::zeros({1, 9}, torch::kLong)), baton::Error);
}

TEST(ModelsTest, RunningTheLayersInSequenceEqualsASequentialOfThem) {
  for (const ModelSpec& spec : all_models()) {
    SCOPED_TRACE(spec.name);
    std::vector<torch::nn::AnyModule> layers;
    torch::nn::Sequential sequential;
    for (int i = 0; i < spec.num_layers(); ++i) {
      layers.push_back(build_layer(spec, i, 5));
      sequential->push_back(layers.back());
    }
    const auto input = spec.name == "gpt" ? torch::randint(0, 32, {2, 8}, torch::kLong)
                       : spec.name == "fashion_cnn" || spec.name == "resnet"
                           ? torch::randn({2, 1, 28, 28})
                           : torch::randn({2, 8});
    auto x = input;
    for (auto& layer : layers) {
      x = layer.forward(x);
    }
    EXPECT_TRUE(torch::equal(x, sequential->forward(input)));
    // An independent build with the same seed computes the same function.
    EXPECT_TRUE(torch::allclose(x, build_sequential(spec, 5)->forward(input)));
  }
}

TEST(ModelsTest, LossesAreTheMeanOverTheBatch) {
  const ModelSpec spec = gpt(1, 16, 2, 20, 8);
  auto model = build_sequential(spec, 0);
  const auto tokens = torch::randint(0, 20, {4, 6}, torch::kLong);
  const auto targets = torch::randint(0, 20, {4, 6}, torch::kLong);
  const auto logits = model->forward(tokens);
  const auto whole = spec.loss(logits, targets);
  const auto halves = (spec.loss(logits.slice(0, 0, 2), targets.slice(0, 0, 2)) +
                       spec.loss(logits.slice(0, 2), targets.slice(0, 2))) /
                      2;
  EXPECT_TRUE(torch::allclose(whole, halves));

  const ModelSpec classifier = mlp(2, 8, 4, 3);
  const auto scores = torch::randn({6, 3});
  const auto labels = torch::randint(0, 3, {6}, torch::kLong);
  const auto per_example = torch::nn::functional::cross_entropy(
      scores, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  EXPECT_TRUE(torch::allclose(classifier.loss(scores, labels), per_example.mean()));
}

TEST(ModelsTest, GptInputThenWeightBackwardEqualsFullBackward) {
  const ModelSpec spec = gpt(2, 16, 2, 20, 8);
  auto full = build_sequential(spec, 1);
  auto split = build_sequential(spec, 1);
  const auto tokens = torch::randint(0, 20, {2, 8}, torch::kLong);
  const auto targets = torch::randint(0, 20, {2, 8}, torch::kLong);
  spec.loss(full->forward(tokens), targets).backward();
  {
    DeferWeightGradScope defer(*split);
    spec.loss(split->forward(tokens), targets).backward();
  }
  EXPECT_EQ(run_deferred_weight_backward(*split), 2 * 4 + 1);
  const auto want = full->named_parameters();
  for (const auto& item : split->named_parameters()) {
    EXPECT_TRUE(torch::allclose(want[item.key()].grad(), item.value().grad(), 1e-6, 1e-6))
        << item.key();
  }
}

TEST(ModelsTest, FromSequentialSplitsByChildrenAndReusesThem) {
  torch::nn::Sequential sequential(torch::nn::Linear(3, 4), torch::nn::ReLU(),
                                   torch::nn::Linear(4, 2));
  const ModelSpec spec = from_sequential(sequential, "user");
  ASSERT_EQ(spec.num_layers(), 3);
  EXPECT_EQ(spec.layers[0].name, "0");
  EXPECT_EQ(build_layer(spec, 2, 0).ptr().get(), sequential->ptr(2).get());
}

TEST(ModelsTest, MakeModelBuildsKnownNamesAndListsThemForUnknownOnes) {
  EXPECT_EQ(make_model("gpt", ModelOptions().layers(3)).num_layers(), 5);
  EXPECT_EQ(make_model("mlp", ModelOptions().layers(3)).num_layers(), 3);
  EXPECT_EQ(make_model("fashion_cnn").num_layers(), 6);
  EXPECT_EQ(make_model("resnet", ModelOptions().layers(3).hidden(4)).num_layers(), 5);
  try {
    make_model("resnet50");
    FAIL() << "expected baton::Error";
  } catch (const baton::Error& error) {
    EXPECT_STREQ(
        error.what(),
        "[nn.make_model] unknown model 'resnet50': known models are mlp, fashion_cnn, gpt, "
        "llama, resnet");
  }
}

// Label smoothing: the loss equals (1 - s) times the cross entropy on the
// label plus s times the mean over classes of -log softmax (Szegedy et al.,
// "Rethinking the Inception Architecture", section 7), written out here.
TEST(ModelsTest, LabelSmoothingMixesTheLabelsLossWithTheMeanOverClasses) {
  torch::manual_seed(3);
  const double s = 0.1;
  auto by_hand = [s](const torch::Tensor& logits, const torch::Tensor& target) {
    const auto log_p = torch::log_softmax(logits.reshape({-1, logits.size(-1)}), -1);
    const auto on_label = -log_p.gather(1, target.reshape({-1, 1})).squeeze(1);
    const auto uniform = -log_p.mean(1);
    return ((1 - s) * on_label + s * uniform).mean();
  };
  // A classifier's logits [N, C] and a language model's [N, T, V].
  const auto image_logits = torch::randn({6, 10});
  const auto image_target = torch::randint(0, 10, {6});
  const auto token_logits = torch::randn({2, 5, 32});
  const auto token_target = torch::randint(0, 32, {2, 5});
  for (const std::string name : {"resnet", "fashion_cnn", "mlp"}) {
    const ModelSpec smoothed =
        make_model(name, ModelOptions().layers(2).hidden(4).classes(10).label_smoothing(s));
    const ModelSpec plain = make_model(name, ModelOptions().layers(2).hidden(4).classes(10));
    EXPECT_NEAR(smoothed.loss(image_logits, image_target).item<double>(),
                by_hand(image_logits, image_target).item<double>(), 1e-6)
        << name;
    EXPECT_GT(std::abs(smoothed.loss(image_logits, image_target).item<double>() -
                       plain.loss(image_logits, image_target).item<double>()),
              1e-3)
        << name;
  }
  for (const std::string name : {"gpt", "llama"}) {
    const ModelSpec smoothed =
        make_model(name, ModelOptions().layers(1).hidden(8).heads(2).vocab(32).label_smoothing(s));
    EXPECT_NEAR(smoothed.loss(token_logits, token_target).item<double>(),
                by_hand(token_logits, token_target).item<double>(), 1e-6)
        << name;
  }
  for (const double bad : {-0.1, 1.0, std::nan("")}) {
    EXPECT_THROW(make_model("mlp", ModelOptions().label_smoothing(bad)), baton::Error) << bad;
  }
}

TEST(ModelsTest, BuildLayerRejectsAnIndexOutsideTheModel) {
  try {
    build_layer(mlp(2, 4, 4, 2), 2, 0);
    FAIL() << "expected baton::Error";
  } catch (const baton::Error& error) {
    EXPECT_STREQ(error.what(), "[nn.build_layer] model 'mlp': layer index 2 is outside [0, 2)");
  }
}

TEST(ModelsTest, GptRejectsHiddenNotDivisibleByHeads) {
  EXPECT_THROW(gpt(1, 10, 3, 20, 8), baton::Error);
}

}  // namespace
}  // namespace baton::nn
