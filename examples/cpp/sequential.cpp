// A torch::nn::Sequential of your own, trained with pipeline parallelism on
// 2 local ranks: `./sequential [steps [microbatches]]` starts them itself,
// each with the same arguments (under torchrun, each process is one rank).
#include <baton/baton.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int train(int steps, int microbatches) {
  torch::manual_seed(0);  // every rank builds the same weights
  torch::nn::Sequential model(torch::nn::Linear(16, 64), torch::nn::ReLU(),
                              torch::nn::Linear(64, 64), torch::nn::ReLU(),
                              torch::nn::Linear(64, 4));
  auto loss = [](const torch::Tensor& output, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(output, target);
  };
  baton::Pipeline pipe(model, loss,
                       baton::PipelineOptions().schedule("1f1b").microbatches(microbatches));
  torch::optim::Adam adam(pipe.parameters(), torch::optim::AdamOptions(1e-2));

  // Every rank draws the same batch: 64 points in 4 classes.
  const torch::Tensor x = torch::randn({64, 16});
  const torch::Tensor y = x.narrow(1, 0, 4).argmax(1);
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    adam.zero_grad();
    last = pipe.step(x, y);  // the mini-batch loss, on every rank
    adam.step();
    if (step == 0) first = last;
    if (pipe.rank() == 0 && step % 5 == 0) std::printf("step %2d  loss %.4f\n", step, last);
  }
  if (pipe.rank() == 0) std::printf("%d steps: loss %.4f -> %.4f\n", steps, first, last);
  return last < first ? 0 : 1;
}

int main(int argc, char** argv) {
  if (std::getenv("RANK") == nullptr) return baton::comm::launch_self(2, argc, argv);
  // A baton::Error is one line naming what went wrong (a bad option, a peer
  // that died: every rank waiting on it gets its own within the timeout).
  try {
    return train(argc > 1 ? std::stoi(argv[1]) : 30, argc > 2 ? std::stoi(argv[2]) : 4);
  } catch (const baton::Error& e) {
    std::fprintf(stderr, "sequential: %s\n", e.what());
    return 1;
  }
}
