#include "baton/data/batches.h"

#include "baton/core/error.h"
#include "baton/core/hash.h"

#include <ATen/CPUGeneratorImpl.h>

namespace baton::data {
namespace {

using baton::splitmix64;

}  // namespace

at::Generator make_generator(uint64_t seed) {
  return at::detail::createCPUGenerator(seed);
}

Batches::Batches(Examples examples, BatchesOptions options)
    : examples_(std::move(examples)), options_(options) {
  BATON_CHECK(options_.batch_size() > 0, "[data.Batches] batch_size must be positive: got ",
              options_.batch_size());
  const torch::Tensor& inputs = examples_.inputs;
  const torch::Tensor& targets = examples_.targets;
  BATON_CHECK((inputs.defined() || targets.defined()) && (!inputs.defined() || inputs.dim() >= 1) &&
                  (!targets.defined() || targets.dim() >= 1) &&
                  (!inputs.defined() || !targets.defined() || inputs.size(0) == targets.size(0)) &&
                  examples_.size() > 0,
              "[data.Batches] inputs and targets must hold the same positive number of rows");
  BATON_CHECK(!options_.drop_last() || examples_.size() >= options_.batch_size(),
              "[data.Batches] drop_last with ", examples_.size(), " examples and batch_size ",
              options_.batch_size(), " leaves no batch");
  set_epoch(0);
}

int64_t Batches::size() const {
  const int64_t n = examples_.size();
  const int64_t b = options_.batch_size();
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

void Batches::set_epoch(int64_t epoch) {
  epoch_ = epoch;
  const int64_t n = examples_.size();
  if (!options_.shuffle()) {
    order_ = torch::arange(n, torch::kLong);
    return;
  }
  at::Generator generator =
      make_generator(splitmix64(splitmix64(options_.seed()) ^ static_cast<uint64_t>(epoch)));
  order_ = torch::randperm(n, generator, torch::kLong);
}

Examples Batches::operator[](int64_t index) const {
  BATON_CHECK(index >= 0 && index < size(), "[data.Batches] batch index ", index,
              " is outside [0, ", size(), ")");
  const int64_t begin = index * options_.batch_size();
  const int64_t end = std::min(begin + options_.batch_size(), examples_.size());
  const auto rows = order_.slice(0, begin, end);
  auto pick = [&](const torch::Tensor& t) {
    return t.defined() ? t.index_select(0, rows.to(t.device())) : t;
  };
  return Examples{pick(examples_.inputs), pick(examples_.targets)};
}

}  // namespace baton::data
