#include "baton/train/evaluate.h"

#include <algorithm>
#include <cmath>

#include "baton/core/error.h"
#include "baton/runtime/microbatch.h"

namespace baton::train {

namespace {

// Collective: runs `data`'s held-out set through the forward-only schedule,
// batch by batch, hands each finished micro-batch's (output, targets) to
// `score`, and returns the scores summed over the world, divided by the rows
// every rank evaluated (each of the dp replicas the whole set, on each of its
// tp ranks). NaN when the set is empty.
template <typename Score>
double over_held_out(Pipeline& pipeline, DataSource& data, const TrainConfig& c, const char* what,
                     Score score) {
  const int64_t n = data.test_size();
  if (n == 0) return std::nan("");
  torch::NoGradGuard no_grad;
  constexpr int kBatchesAhead = 4;
  int batches = 0;
  double sum = 0;
  for (int64_t begin = 0; begin < n; begin += c.batch) {
    const int64_t size = std::min<int64_t>(c.batch, n - begin);
    const int m = static_cast<int>(std::min<int64_t>(c.microbatches, size));
    // Each rank holds the part its stages read (a middle rank none).
    const auto [inputs, targets] = data.test_rows(begin, size);
    // Micro-batch by micro-batch: with Chimera two ranks each finish some.
    const auto outputs = pipeline.eval_microbatches(inputs, m);
    // Every kBatchesAhead batches all ranks meet: a forward-only schedule
    // sends nothing back, so without it the first stage's ranks run ahead
    // through the set and the next stage's queue every message they sent
    // (resnet's last stage held 477 MB of them). Meeting every batch would
    // drain the pipeline each time: (m + p - 1) / m of the time (resnet,
    // m = 4, p = 2: 1.25x); every 4th, about 1 + (p - 1) / (4 m).
    if (++batches % kBatchesAhead == 0) pipeline.communicator().barrier("the held-out batches");
    if (outputs.empty()) continue;
    BATON_ASSERT(targets.defined(), "a rank with outputs holds no held-out targets");
    const auto labels = runtime::split_microbatches(targets, m);
    for (const auto& [mb, output] : outputs) sum += score(output, labels[mb].to(output.device()));
  }
  std::vector<torch::Tensor> t{torch::tensor({sum}, torch::kFloat64)};
  pipeline.communicator().all_reduce_sum(t, what);
  return t[0].item<double>() / (static_cast<double>(n) * c.dp * c.tp);
}

}  // namespace

double test_accuracy(Pipeline& pipeline, DataSource& data, const TrainConfig& c) {
  if (data.test_size() == 0) return -1;
  return over_held_out(pipeline, data, c, "the test accuracy sum",
                       [](const torch::Tensor& logits, const torch::Tensor& labels) {
                         return logits.argmax(-1).eq(labels).sum().item<double>();
                       });
}

double valid_loss(Pipeline& pipeline, const nn::ModelSpec& model, DataSource& data,
                  const TrainConfig& c) {
  return over_held_out(pipeline, data, c, "the held-out loss sum",
                       [&](const torch::Tensor& logits, const torch::Tensor& targets) {
                         // The model's mean loss, back to a sum over the micro-batch's rows.
                         return model.loss(logits.to(torch::kFloat32), targets).item<double>() *
                                targets.size(0);
                       });
}

}  // namespace baton::train
