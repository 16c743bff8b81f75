#include "baton/runtime/zero.h"

#include <algorithm>
#include <string>
#include <utility>

#include "baton/comm/memory_counter.h"
#include "baton/core/error.h"

namespace baton::runtime {

ZeroShards::ZeroShards(int zero, const std::map<int, std::shared_ptr<Stage>>& stages,
                       std::shared_ptr<comm::Communicator> dp_group, std::set<int> deferred)
    : zero_(zero),
      dp_(std::move(dp_group)),
      dp_size_(dp_->world_size()),
      dp_rank_(dp_->rank()),
      deferred_(std::move(deferred)) {
  BATON_CHECK(zero_ >= 1 && zero_ <= 3, "[runtime.zero] ZeRO stage must be 1 to 3, got ", zero_);
  torch::NoGradGuard no_grad;
  // A ZeRO-3 shard is the parameter at rest: counted as parameters, as the
  // memory model has it (outside a scope it was `other`, and the prediction,
  // which takes `other` as measured, counted it twice: 1.055-1.070 on gpt
  // dp 2 x pp 2).
  comm::MemoryCategoryScope charged(comm::MemoryCategory::kParameters);
  for (const auto& [index, stage] : stages) {
    std::vector<Piece>& pieces = pieces_[index];
    for (const torch::Tensor& p : stage->parameters()) {
      BATON_CHECK(p.is_contiguous(), "[runtime.zero] stage ", index,
                  " has a parameter that is not contiguous; ZeRO shards parameters flat");
      Piece k;
      k.parameter = p;
      k.sizes = p.sizes().vec();
      k.numel = p.numel();
      k.chunk = (k.numel + dp_size_ - 1) / dp_size_;
      k.begin = std::min(k.numel, dp_rank_ * k.chunk);
      k.length = std::min(k.numel, k.begin + k.chunk) - k.begin;
      torch::Tensor slice = p.detach().view({-1}).narrow(0, k.begin, k.length);
      // ZeRO-1/2: the optimizer writes this replica's part of the parameter
      // in place; ZeRO-3: the shard outlives the parameter's storage.
      k.shard = zero_ == 3 ? slice.clone() : slice;
      k.shard.set_requires_grad(true);
      all_shards_.push_back(k.shard);
      pieces.push_back(std::move(k));
    }
  }
}

torch::Tensor ZeroShards::shard_of(const torch::Tensor& parameter) const {
  for (const auto& [stage, pieces] : pieces_)
    for (const Piece& k : pieces)
      if (k.parameter.unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl()) return k.shard;
  return {};
}

ZeroShards::Place ZeroShards::place_of(const torch::Tensor& parameter) const {
  for (const auto& [stage, pieces] : pieces_)
    for (const Piece& k : pieces)
      if (k.parameter.unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl())
        return {k.sizes, k.begin, k.length};
  return {};
}

void ZeroShards::refresh_shards() {
  if (zero_ != 3) return;
  torch::NoGradGuard no_grad;
  for (auto& [stage, pieces] : pieces_) {
    for (Piece& k : pieces) {
      BATON_CHECK(k.parameter.numel() == k.numel, "[runtime.zero] stage ", stage,
                  ": refresh_shards needs the parameters gathered");
      k.shard.detach().copy_(k.parameter.detach().reshape({-1}).narrow(0, k.begin, k.length));
    }
  }
}

void ZeroShards::start_unshard(int stage) {
  const auto found = pieces_.find(stage);
  if (found == pieces_.end() || pending_.count(stage)) return;
  torch::NoGradGuard no_grad;
  // One message per dtype: each replica's chunks, padded to c, in order.
  std::map<c10::ScalarType, std::vector<size_t>> by_dtype;
  for (size_t i = 0; i < found->second.size(); ++i)
    by_dtype[found->second[i].shard.scalar_type()].push_back(i);
  auto& handles = pending_[stage];
  for (auto& [dtype, members] : by_dtype) {
    std::vector<torch::Tensor> parts;
    for (size_t i : members) {
      const Piece& k = found->second[i];
      parts.push_back(k.shard.detach());
      if (k.length < k.chunk)
        parts.push_back(torch::zeros({k.chunk - k.length}, k.shard.options()));
    }
    handles.emplace_back(
        members, dp_->all_gather_async(torch::cat(parts),
                                       "stage " + std::to_string(stage) + " UNSHARD (the ZeRO-" +
                                           std::to_string(zero_) + " parameter all-gather)"));
  }
}

void ZeroShards::finish_unshard(int stage) {
  const auto found = pending_.find(stage);
  if (found == pending_.end()) return;
  auto handles = std::move(found->second);
  pending_.erase(found);
  torch::NoGradGuard no_grad;
  // The gathered weights are parameters, whichever action waits for them.
  comm::MemoryCategoryScope charged(comm::MemoryCategory::kParameters);
  std::vector<Piece>& pieces = pieces_.at(stage);
  for (auto& [members, handle] : handles) {
    const std::vector<torch::Tensor> parts = handle.wait();
    int64_t offset = 0;
    for (size_t i : members) {
      Piece& k = pieces[i];
      torch::Tensor whole;
      if (zero_ == 3) {
        whole = torch::empty({k.numel}, k.shard.options().requires_grad(false));
        k.parameter.set_data(whole.view(k.sizes));
      } else {
        whole = k.parameter.detach().view({-1});
      }
      for (int d = 0; d < dp_size_; ++d) {
        const int64_t begin = std::min(k.numel, d * k.chunk);
        const int64_t length = std::min(k.numel, begin + k.chunk) - begin;
        // Under ZeRO-1/2 this replica's part is in place already.
        if (length == 0 || (d == dp_rank_ && zero_ != 3)) continue;
        whole.narrow(0, begin, length)
            .copy_(parts[static_cast<size_t>(d)].narrow(0, offset, length));
      }
      offset += k.chunk;
    }
  }
}

void ZeroShards::reshard(int stage) {
  finish_unshard(stage);
  if (zero_ != 3) return;
  const auto found = pieces_.find(stage);
  if (found == pieces_.end()) return;
  torch::NoGradGuard no_grad;
  for (Piece& k : found->second)
    k.parameter.set_data(torch::empty({0}, k.shard.options().requires_grad(false)));
}

void ZeroShards::gather_all() {
  // Always gathered afresh: the optimizer may have stepped the shards since.
  for (const auto& [stage, pieces] : pieces_) start_unshard(stage);
  for (const auto& [stage, pieces] : pieces_) finish_unshard(stage);
}

void ZeroShards::reshard_all() {
  for (const auto& [stage, pieces] : pieces_) reshard(stage);
}

comm::ReduceHandle ZeroShards::start_scatter(int stage, const std::vector<int>& members,
                                             const std::string& what) {
  torch::NoGradGuard no_grad;
  comm::MemoryCategoryScope charged(comm::MemoryCategory::kBuffers);
  std::vector<Piece>& pieces = pieces_.at(stage);
  BATON_CHECK(!members.empty(), "[runtime.zero] stage ", stage, ": an empty gradient bucket");
  const auto dtype = pieces[static_cast<size_t>(members.front())].shard.scalar_type();
  int64_t per_replica = 0;
  for (int i : members) {
    const Piece& k = pieces[static_cast<size_t>(i)];
    BATON_CHECK(k.shard.scalar_type() == dtype, "[runtime.zero] stage ", stage,
                ": a gradient bucket mixes dtypes");
    per_replica += k.chunk;
  }
  // Replica d's part: each member's d-th chunk of its gradient / dp (DDP's
  // order: divide, then sum), zero-padded to c.
  torch::Tensor input =
      torch::zeros({dp_size_ * per_replica}, pieces[0].shard.options().requires_grad(false));
  int64_t offset = 0;
  for (int i : members) {
    Piece& k = pieces[static_cast<size_t>(i)];
    const torch::Tensor g = k.parameter.grad();
    if (g.defined()) {
      const torch::Tensor flat = g.reshape({-1});
      for (int d = 0; d < dp_size_; ++d) {
        const int64_t begin = std::min(k.numel, d * k.chunk);
        const int64_t length = std::min(k.numel, begin + k.chunk) - begin;
        if (length > 0)
          input.narrow(0, d * per_replica + offset, length)
              .copy_(flat.narrow(0, begin, length))
              .div_(dp_size_);
      }
    }
    k.parameter.mutable_grad() = torch::Tensor();
    offset += k.chunk;
  }
  torch::Tensor chunks = torch::empty({per_replica}, input.options());
  scatters_.push_back({stage, members, chunks});
  return dp_->reduce_scatter_sum_async(input, chunks, what);
}

void ZeroShards::note_scattered(int stage, const std::vector<int>& members) {
  for (int i : members) scattered_.emplace_back(stage, i);
}

void ZeroShards::slice_gradients(bool deferred_too) {
  torch::NoGradGuard no_grad;
  comm::MemoryCategoryScope charged(comm::MemoryCategory::kGradients);
  if (zero_ == 1) {
    // Once the step's all-reduces are done (the caller's optimizers may
    // detach_() a gradient, which a view cannot take: a copy).
    if (!deferred_too) return;
    for (auto& [stage, pieces] : pieces_) {
      for (Piece& k : pieces) {
        const torch::Tensor g = k.parameter.grad();
        if (!g.defined()) continue;
        k.shard.mutable_grad() = g.reshape({-1}).narrow(0, k.begin, k.length).clone();
        k.parameter.mutable_grad() = torch::Tensor();
      }
    }
    return;
  }
  std::vector<std::pair<int, int>> later;
  for (const auto& [stage, i] : scattered_) {
    if (!deferred_too && deferred_.count(stage)) {
      later.emplace_back(stage, i);
      continue;
    }
    Piece& k = pieces_.at(stage)[static_cast<size_t>(i)];
    const torch::Tensor g = k.parameter.grad();
    if (!g.defined()) continue;
    k.shard.mutable_grad() = g.reshape({-1}).narrow(0, k.begin, k.length).clone();
    k.parameter.mutable_grad() = torch::Tensor();
  }
  scattered_ = std::move(later);
  // The reduce-scatters, waited for by now: each shard's part of its bucket.
  for (const Scatter& s : scatters_) {
    int64_t offset = 0;
    for (int i : s.members) {
      Piece& k = pieces_.at(s.stage)[static_cast<size_t>(i)];
      k.shard.mutable_grad() = s.chunks.narrow(0, offset, k.length).clone();
      offset += k.chunk;
    }
  }
  scatters_.clear();
}

void ZeroShards::clear_gradients() {
  // The shards' gradients too: the step cuts them anew, and kept (LibTorch
  // 1.13's zero_grad zeroes them in place) they would sit beside the whole
  // gradients at the backward's peak.
  for (auto& [stage, pieces] : pieces_) {
    for (Piece& k : pieces) {
      k.parameter.mutable_grad() = torch::Tensor();
      k.shard.mutable_grad() = torch::Tensor();
    }
  }
  scattered_.clear();
  scatters_.clear();
}

}  // namespace baton::runtime
