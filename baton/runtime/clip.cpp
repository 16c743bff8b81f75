#include "baton/runtime/clip.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include "baton/nn/tensor_split.h"

namespace baton::runtime {

NormClipper::NormClipper(const schedule::Placement& placement, const comm::RankLayout& layout,
                         const std::map<int, std::shared_ptr<Stage>>& stages,
                         const std::vector<std::vector<TiedCopy>>& tied, const ZeroShards* zero)
    : world_(layout.world) {
  const bool sharded = zero != nullptr && zero->zero() >= 2;
  // Copies of a tied weight off its lowest stage, as (stage, name).
  std::set<std::pair<int, std::string>> not_owned;
  for (const auto& copies : tied) {
    if (copies.empty()) continue;
    const TiedCopy* owner = &copies.front();
    for (const TiedCopy& c : copies)
      if (c.stage < owner->stage) owner = &c;
    for (const TiedCopy& c : copies)
      if (&c != owner) not_owned.insert({c.stage, c.name});
  }
  const bool first_replica = layout.here.dp == 0;
  const bool first_tp = layout.here.tp == 0;
  const int rank = layout.pipeline_rank();
  std::set<const void*> seen;  // a tensor shared under two names counts and scales once
  for (const auto& [index, stage] : stages) {
    const std::vector<int> holders = placement.ranks_of_stage(index);
    const bool lowest_holder =
        holders.empty() || *std::min_element(holders.begin(), holders.end()) == rank;
    const auto splits = nn::tensor_parallel_splits(stage->module());
    for (const auto& item : stage->module().named_parameters()) {
      if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
      // Under ZeRO-2/3 the gradient here is the shard's, and each replica's counts.
      const torch::Tensor held = sharded ? zero->shard_of(item.value()) : item.value();
      all_.push_back(held);
      if ((!first_replica && !sharded) || !lowest_holder) continue;
      if (not_owned.count({index, item.key()})) continue;
      if (!first_tp && splits.count(item.key()) == 0) continue;
      owned_.push_back(held);
    }
  }
}

double NormClipper::clip(double max_norm, const std::string& what, double unscale) {
  torch::Tensor squares;
  for (const auto& p : owned_) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    torch::Tensor s = g.detach().to(torch::kFloat64).pow(2).sum();
    squares = squares.defined() ? squares + s : s;
  }
  if (!squares.defined()) {
    torch::Device device = all_.empty() ? torch::Device(torch::kCPU) : all_.front().device();
    squares = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  }
  std::vector<torch::Tensor> sum{squares.reshape({1})};
  world_->all_reduce_sum(sum, what);
  const double norm = std::sqrt(sum.front().item<double>()) * unscale;
  if (!std::isfinite(norm)) return norm;
  const double factor = unscale * std::min(1.0, max_norm / (norm + 1e-6));
  if (factor == 1) return norm;
  for (auto& p : all_) {
    torch::Tensor g = p.mutable_grad();
    if (g.defined()) g.mul_(factor);
  }
  return norm;
}

}  // namespace baton::runtime
