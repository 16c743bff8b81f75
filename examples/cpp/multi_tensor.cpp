// Several tensors across a stage boundary, and a skip connection across
// stages: a toy decoder whose layers pass hidden states with integer
// positions and a boolean mask (none of which need a gradient but the hidden
// states), and whose head adds the embedding's output, stashed by the first
// layer and popped by the last: on 2 stages it goes straight from rank 0 to
// rank 1. Trained on 2 stages and compared with the same model in one
// process. `./multi_tensor [steps]` starts 2 local ranks itself; it exits 1
// when the pipeline and one process differ.
#include <baton/baton.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using Tensors = std::vector<torch::Tensor>;
constexpr int kHidden = 32, kPositions = 16, kClasses = 4;

// {tokens} -> {hidden, positions, mask}: one input in, three tensors out; it
// also stashes the hidden states for the head (declared: skip_names).
struct EmbedImpl : torch::nn::Module, baton::nn::Skippable {
  EmbedImpl() : token(register_module("token", torch::nn::Embedding(64, kHidden))) {}
  baton::nn::SkipNames skip_names() const override { return {{"embedded"}, {}}; }
  Tensors forward(const torch::Tensor& tokens) {
    const torch::Tensor positions = torch::arange(tokens.size(1)).expand_as(tokens);
    const torch::Tensor hidden = token(tokens);
    baton::nn::stash("embedded", hidden);
    return {hidden, positions, tokens != 0};  // token 0 is padding
  }
  torch::nn::Embedding token;
};
TORCH_MODULE(Embed);

// {hidden, positions, mask} -> the same three: a position-aware block.
struct BlockImpl : torch::nn::Module {
  BlockImpl()
      : fc(register_module("fc", torch::nn::Linear(kHidden, kHidden))),
        position(register_module("position", torch::nn::Embedding(kPositions, kHidden))) {}
  Tensors forward(const Tensors& in) {
    const torch::Tensor& mask = in[2];
    const torch::Tensor h = in[0] + torch::tanh(fc(in[0] + position(in[1])));
    return {h * mask.unsqueeze(-1), in[1], mask};
  }
  torch::nn::Linear fc;
  torch::nn::Embedding position;
};
TORCH_MODULE(Block);

// {hidden, positions, mask} -> logits from the mean of the unmasked
// positions, with the embedding's output popped back in (a skip connection).
struct HeadImpl : torch::nn::Module, baton::nn::Skippable {
  HeadImpl() : fc(register_module("fc", torch::nn::Linear(kHidden, kClasses))) {}
  baton::nn::SkipNames skip_names() const override { return {{}, {"embedded"}}; }
  torch::Tensor forward(const Tensors& in) {
    const torch::Tensor mask = in[2].unsqueeze(-1).to(torch::kFloat);
    const torch::Tensor hidden = in[0] + baton::nn::pop("embedded");
    return fc((hidden * mask).sum(1) / mask.sum(1).clamp_min(1));
  }
  torch::nn::Linear fc;
};
TORCH_MODULE(Head);

baton::nn::ModelSpec decoder() {
  baton::nn::ModelSpec model;
  model.name = "decoder";
  // A lazily built layer declares its skips in its LayerSpec (a Sequential's
  // child, as nn::Skippable; these do both).
  model.layers.push_back(
      {"embed", [] { return torch::nn::AnyModule(Embed()); }, {{"embedded"}, {}}});
  for (int i = 0; i < 4; ++i)
    model.layers.push_back({"block", [] { return torch::nn::AnyModule(Block()); }});
  model.layers.push_back({"head", [] { return torch::nn::AnyModule(Head()); }, {{}, {"embedded"}}});
  model.loss = [](const torch::Tensor& output, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(output, target);
  };
  return model;
}

std::pair<torch::Tensor, torch::Tensor> batch(int step) {
  torch::manual_seed(100 + step);  // every rank draws the same batch
  const torch::Tensor tokens = torch::randint(0, 64, {32, kPositions}, torch::kLong);
  return {tokens, tokens.narrow(1, 0, 1).squeeze(1) % kClasses};
}

int train(int steps) {
  const baton::nn::ModelSpec model = decoder();
  baton::Pipeline pipe(model, {}, baton::PipelineOptions().schedule("1f1b").microbatches(4));
  torch::optim::SGD sgd(pipe.parameters(), torch::optim::SGDOptions(0.1));
  // One process: the same layers (seed 1, PipelineOptions' default), called in order.
  torch::nn::Sequential one = baton::nn::build_sequential(model, 1);
  torch::optim::SGD one_sgd(one->parameters(), torch::optim::SGDOptions(0.1));
  double worst = 0, first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    const auto [x, y] = batch(step);
    sgd.zero_grad();
    last = pipe.step(x, y);
    sgd.step();
    one_sgd.zero_grad();
    auto layer = one->begin();
    Tensors h = layer->forward<Tensors>(x);
    for (++layer; layer + 1 != one->end(); ++layer) h = layer->forward<Tensors>(h);
    const torch::Tensor loss = model.loss(layer->forward<torch::Tensor>(h), y);
    loss.backward();
    one_sgd.step();
    worst = std::max(worst, std::abs(last - loss.item<double>()) / std::abs(loss.item<double>()));
    if (step == 0) first = last;
  }
  const auto reference = one->named_parameters();
  for (const auto& [name, value] : pipe.named_parameters()) {
    const torch::Tensor& expected = reference[name.substr(6)];  // "layer.3.fc.weight"
    worst = std::max(worst, (value - expected).norm().item<double>() /
                                std::max(1e-12, expected.norm().item<double>()));
  }
  std::printf(
      "multi_tensor: %d steps: loss %.4f -> %.4f, largest relative difference from one "
      "process %.2e\n",
      steps, first, last, worst);
  return worst <= 1e-5 && last < first ? 0 : 1;
}

int main(int argc, char** argv) {
  if (std::getenv("RANK") == nullptr) return baton::comm::launch_self(2, argc, argv);
  try {
    return train(argc > 1 ? std::stoi(argv[1]) : 30);
  } catch (const baton::Error& e) {
    std::fprintf(stderr, "multi_tensor: %s\n", e.what());
    return 1;
  }
}
