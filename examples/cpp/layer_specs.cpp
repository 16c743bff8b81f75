// A model built lazily from your own LayerSpecs: each rank builds only the
// layers of its stages, seeded by (seed, layer index), so every layout starts
// from the same weights. `./layer_specs [steps]` starts 2 local ranks itself.
#include <baton/baton.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

// Your layer: one tensor in, one tensor out.
struct BlockImpl : torch::nn::Module {
  BlockImpl(int in, int out) : fc(register_module("fc", torch::nn::Linear(in, out))) {}
  torch::Tensor forward(const torch::Tensor& x) { return torch::relu(fc(x)); }
  torch::nn::Linear fc;
};
TORCH_MODULE(Block);

int train(int steps) {
  baton::nn::ModelSpec model;
  model.name = "blocks";
  for (int i = 0; i < 6; ++i) {
    model.layers.push_back({"block" + std::to_string(i),
                            [i] { return torch::nn::AnyModule(Block(i == 0 ? 16 : 64, 64)); }});
  }
  model.layers.push_back({"head", [] { return torch::nn::AnyModule(torch::nn::Linear(64, 4)); }});
  model.loss = [](const torch::Tensor& output, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(output, target);
  };
  baton::Pipeline pipe(model, {},
                       baton::PipelineOptions().schedule("zb-h1").microbatches(4).seed(7));
  torch::optim::Adam adam(pipe.parameters(), torch::optim::AdamOptions(1e-2));

  torch::manual_seed(0);  // every rank draws the same batch
  const torch::Tensor x = torch::randn({64, 16});
  const torch::Tensor y = x.narrow(1, 0, 4).argmax(1);
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    adam.zero_grad();
    last = pipe.step(x, y);
    adam.step();
    if (step == 0) first = last;
    if (pipe.rank() == 0 && step % 5 == 0) std::printf("step %2d  loss %.4f\n", step, last);
  }
  if (pipe.rank() == 0)
    std::printf("rank 0 holds layers %d..%d; %d steps: loss %.4f -> %.4f\n",
                pipe.stage_layers().front().second.front(),
                pipe.stage_layers().back().second.back(), steps, first, last);
  return last < first ? 0 : 1;
}

int main(int argc, char** argv) {
  if (std::getenv("RANK") == nullptr) return baton::comm::launch_self(2, argc, argv);
  try {
    return train(argc > 1 ? std::stoi(argv[1]) : 30);
  } catch (const baton::Error& e) {
    std::fprintf(stderr, "layer_specs: %s\n", e.what());
    return 1;
  }
}
