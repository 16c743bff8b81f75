#include "baton/train/evaluate.h"

#include <algorithm>

#include "baton/runtime/microbatch.h"

namespace baton::train {

double test_accuracy(Pipeline& pipeline, DataSource& data, const TrainConfig& c) {
  auto [inputs, targets] = data.test_set();
  if (!inputs.defined()) return -1;
  const int64_t n = inputs.size(0);
  double correct = 0;
  for (int64_t begin = 0; begin < n; begin += c.batch) {
    const int64_t size = std::min<int64_t>(c.batch, n - begin);
    const int m = static_cast<int>(std::min<int64_t>(c.microbatches, size));
    // Micro-batch by micro-batch: with Chimera two ranks each finish some.
    const auto outputs = pipeline.eval_microbatches(inputs.narrow(0, begin, size), m);
    const auto labels = runtime::split_microbatches(targets.narrow(0, begin, size), m);
    for (const auto& [mb, logits] : outputs) {
      correct += logits.argmax(-1).cpu().eq(labels[mb]).sum().item<double>();
    }
  }
  std::vector<torch::Tensor> t{torch::tensor({correct}, torch::kFloat64)};
  pipeline.communicator().all_reduce_sum(t, "the test accuracy sum");
  correct = t[0].item<double>();
  // Each of the dp replicas evaluated the whole test set, on each of its tp ranks.
  return correct / (static_cast<double>(n) * c.dp * c.tp);
}

}  // namespace baton::train
