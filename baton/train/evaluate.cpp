#include "baton/train/evaluate.h"

#include <algorithm>

#include "baton/core/error.h"
#include "baton/runtime/microbatch.h"

namespace baton::train {

double test_accuracy(Pipeline& pipeline, DataSource& data, const TrainConfig& c) {
  const int64_t n = data.test_size();
  if (n == 0) return -1;
  double correct = 0;
  for (int64_t begin = 0; begin < n; begin += c.batch) {
    const int64_t size = std::min<int64_t>(c.batch, n - begin);
    const int m = static_cast<int>(std::min<int64_t>(c.microbatches, size));
    // Each rank holds the part its stages read (a middle rank none).
    const auto [inputs, targets] = data.test_rows(begin, size);
    // Micro-batch by micro-batch: with Chimera two ranks each finish some.
    const auto outputs = pipeline.eval_microbatches(inputs, m);
    if (outputs.empty()) continue;
    BATON_ASSERT(targets.defined(), "a rank with outputs holds no test labels");
    const auto labels = runtime::split_microbatches(targets, m);
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
