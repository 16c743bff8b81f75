#include "baton/train/evaluate.h"

#include <algorithm>
#include <cmath>

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

double valid_loss(Pipeline& pipeline, const nn::ModelSpec& model, DataSource& data,
                  const TrainConfig& c) {
  const int64_t n = data.test_size();
  if (n == 0) return std::nan("");
  torch::NoGradGuard no_grad;
  double sum = 0;  // of each sample's loss, on the ranks that finish micro-batches
  for (int64_t begin = 0; begin < n; begin += c.batch) {
    const int64_t size = std::min<int64_t>(c.batch, n - begin);
    const int m = static_cast<int>(std::min<int64_t>(c.microbatches, size));
    const auto [inputs, targets] = data.test_rows(begin, size);
    const auto outputs = pipeline.eval_microbatches(inputs, m);
    if (outputs.empty()) continue;
    BATON_ASSERT(targets.defined(), "a rank with outputs holds no held-out targets");
    const auto labels = runtime::split_microbatches(targets, m);
    for (const auto& [mb, logits] : outputs) {
      const torch::Tensor target = labels[mb].to(logits.device());
      sum += model.loss(logits.to(torch::kFloat32), target).item<double>() * target.size(0);
    }
  }
  std::vector<torch::Tensor> t{torch::tensor({sum}, torch::kFloat64)};
  pipeline.communicator().all_reduce_sum(t, "the held-out loss sum");
  // Each of the dp replicas evaluated the whole set, on each of its tp ranks.
  return t[0].item<double>() / (static_cast<double>(n) * c.dp * c.tp);
}

}  // namespace baton::train
