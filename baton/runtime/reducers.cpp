#include "baton/runtime/reducers.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include "baton/comm/tag.h"
#include "baton/core/error.h"
#include "baton/runtime/on_device.h"
#include "baton/schedule/grad_reduction.h"

namespace baton::runtime {

using schedule::Action;
using schedule::ActionKind;

BucketReducer::BucketReducer(const schedule::Schedule& schedule, int rank,
                             const std::map<int, std::shared_ptr<Stage>>& stages,
                             std::shared_ptr<comm::Communicator> dp_group, double bucket_bytes)
    : stages_(stages), dp_group_(std::move(dp_group)) {
  if (dp_group_->world_size() == 1) return;
  for (const auto& [index, stage] : stages_) {
    std::vector<double> bytes;
    for (const auto& p : stage->parameters()) bytes.push_back(static_cast<double>(p.nbytes()));
    buckets_[index] = schedule::gradient_bucket_members(bytes, bucket_bytes);
  }
  // Every bucket must be reduced exactly once, or replicas would step apart.
  std::map<int, int> reductions;
  for (const Action& a : schedule.actions[rank])
    reductions[a.stage] += schedule::is_grad_reduction(a.kind);
  for (const auto& [index, buckets] : buckets_) {
    const int expected = std::max(1, static_cast<int>(buckets.size()));
    BATON_CHECK(reductions[index] == expected, "[runtime.executor] rank ", rank, ": stage ", index,
                " has ", buckets.size(), " gradient bucket(s) of ", bucket_bytes / (1 << 20),
                " MiB but schedule \"", schedule.name, "\" reduces it in ", reductions[index],
                " REDUCE_GRAD action(s)");
  }
}

std::optional<comm::ReduceHandle> BucketReducer::start(int s, int bucket) const {
  if (dp_group_->world_size() == 1) return std::nullopt;
  const auto& buckets = buckets_.at(s);
  // A stage without parameters still has one (empty) bucket in the schedule.
  if (buckets.empty()) return std::nullopt;
  const auto params = stages_.at(s)->parameters();
  const double dp = dp_group_->world_size();
  std::vector<torch::Tensor> grads;
  BATON_ASSERT(bucket >= 0 && bucket < static_cast<int>(buckets.size()), "stage ", s,
               " has no bucket ", bucket);
  for (int i : buckets[static_cast<size_t>(bucket)]) {
    torch::Tensor p = params[static_cast<size_t>(i)];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    // DDP's order: divide, then sum, so the result is the replicas' mean.
    p.mutable_grad().div_(dp);
    grads.push_back(p.grad());
  }
  return dp_group_->all_reduce_sum_async(
      std::move(grads),
      "stage " + std::to_string(s) + " gradient bucket " + std::to_string(bucket) + " REDUCE_GRAD");
}

std::vector<int> BucketReducer::members(int s, int bucket) const {
  const auto found = buckets_.find(s);
  if (found == buckets_.end() || bucket < 0 || bucket >= static_cast<int>(found->second.size()))
    return {};
  return found->second[static_cast<size_t>(bucket)];
}

double wait_all(std::vector<comm::ReduceHandle>& pending) {
  if (pending.empty()) return 0;
  const auto from = std::chrono::steady_clock::now();
  for (auto& reduction : pending) reduction.wait();
  pending.clear();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
}

TiedReducer::TiedReducer(const schedule::Schedule& schedule, const schedule::Placement& placement,
                         const comm::RankLayout& layout,
                         const std::map<int, std::shared_ptr<Stage>>& stages,
                         const std::vector<std::vector<TiedCopy>>& tied, torch::Device device)
    : rank_(layout.pipeline_rank()), layout_(layout), device_(device) {
  // Which tied weight (slot "tied/<i>") each named copy of this rank is, and
  // the stages holding copies of each tied weight.
  std::map<std::pair<int, std::string>, std::string> slot_of;
  std::vector<std::vector<int>> tied_stages;
  for (size_t i = 0; i < tied.size(); ++i) {
    tied_stages.emplace_back();
    for (const auto& copy : tied[i]) {
      slot_of[{copy.stage, copy.name}] = "tied/" + std::to_string(i);
      tied_stages.back().push_back(copy.stage);
    }
  }
  // A rank shares a stage's slots when it computes the stage (a replicated
  // stage) or, for a tied weight, any stage holding one of its copies.
  auto holds = [&](int r, int stage, const std::string& slot) {
    auto computes = [&](int st) {
      const auto ranks = placement.ranks_of_stage(st);
      return std::find(ranks.begin(), ranks.end(), r) != ranks.end();
    };
    if (slot.rfind("tied/", 0) == 0) {
      for (int st : tied_stages[std::stoul(slot.substr(5))])
        if (computes(st)) return true;
      return false;
    }
    return computes(stage);
  };
  std::map<int, std::set<int>> ranks_of_group;  // every rank with a REDUCE_TIED of the group
  for (int r = 0; r < schedule.ranks; ++r) {
    for (const Action& a : schedule.actions[r])
      if (a.kind == ActionKind::REDUCE_TIED) ranks_of_group[a.microbatch].insert(r);
  }
  std::map<int, int> tied_here;  // stage -> its REDUCE_TIED group on this rank
  const auto& actions = schedule.actions[rank_];
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind != ActionKind::REDUCE_TIED) continue;
    tied_here[a.stage] = a.microbatch;
    Group& group = groups_[a.microbatch];
    group.last = i;
    const bool replicated = placement.ranks_of_stage(a.stage).size() > 1;
    for (const auto& item : stages.at(a.stage)->module().named_parameters()) {
      const auto found = slot_of.find({a.stage, item.key()});
      if (found == slot_of.end() && !replicated) continue;
      const std::string slot = found != slot_of.end() ? found->second : item.key();
      group.copies[slot].push_back(item.value());
      for (int r : ranks_of_group[a.microbatch]) {
        if (r != rank_ && holds(r, a.stage, slot)) group.shared[r].push_back(slot);
      }
    }
  }
  for (auto& [g, group] : groups_) {
    for (auto& [r, slots] : group.shared) {
      std::sort(slots.begin(), slots.end());
      slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
    }
  }
  // Copies without a REDUCE_TIED would step apart: refuse the schedule.
  for (const auto& [index, stage] : stages) {
    bool copied = placement.ranks_of_stage(index).size() > 1;
    for (const auto& [key, slot] : slot_of) copied |= key.first == index;
    BATON_CHECK(!copied || tied_here.count(index), "[runtime.executor] rank ", rank_, ": stage ",
                index, " holds parameters with copies elsewhere in the pipeline (a replicated ",
                "stage or a tied weight) but schedule \"", schedule.name, "\" has no REDUCE_TIED ",
                "of it on this rank; add them with schedule::add_tied_reductions");
  }
}

bool TiedReducer::sums_at(int group, size_t index) const {
  const auto found = groups_.find(group);
  return found != groups_.end() && found->second.last == index;
}

void TiedReducer::sum(int group_index) {
  Group& group = groups_.at(group_index);
  // This rank's part of each slot: its copies' gradients, in stage order.
  std::map<std::string, torch::Tensor> partial;
  for (auto& [slot, copies] : group.copies) {
    torch::Tensor sum;
    for (auto& p : copies) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      sum = sum.defined() ? sum + p.grad() : p.grad().clone();
    }
    partial[slot] = sum;
  }
  // One message each way per other rank: the slots both hold, in slot order.
  const comm::Tag tag = comm::tied_sum_tag(group_index);
  std::map<int, comm::RecvHandle> received;
  std::vector<comm::SendHandle> sends;
  for (const auto& [r, slots] : group.shared) {
    const int peer = layout_.world_rank_of(r);
    received.emplace(r, layout_.world->irecv(peer, tag));
    std::vector<torch::Tensor> flat;
    for (const auto& slot : slots) flat.push_back(partial.at(slot).reshape({-1}));
    sends.push_back(layout_.world->isend(torch::cat(flat), peer, tag));
  }
  // Every holder adds the parts in rank order, so every copy gets the same bits.
  std::map<std::string, torch::Tensor> total;
  auto add = [&](const std::string& slot, const torch::Tensor& part) {
    auto& t = total[slot];
    t = t.defined() ? t + part : part.clone();
  };
  const std::string what = "the tied gradient sum of group " + std::to_string(group_index);
  std::map<int, torch::Tensor> parts;
  for (auto& [r, handle] : received)
    parts[r] = on_device(handle.wait(what + " with rank " + std::to_string(r)), device_);
  std::set<int> ranks{rank_};
  for (const auto& [r, slots] : group.shared) ranks.insert(r);
  for (int r : ranks) {
    if (r == rank_) {
      for (const auto& [slot, part] : partial) add(slot, part);
      continue;
    }
    int64_t offset = 0;
    for (const auto& slot : group.shared.at(r)) {
      const torch::Tensor& like = partial.at(slot);
      add(slot, parts.at(r).narrow(0, offset, like.numel()).view_as(like));
      offset += like.numel();
    }
  }
  for (auto& send : sends) send.wait(what);
  for (auto& [slot, copies] : group.copies) {
    for (auto& p : copies) p.mutable_grad().copy_(total.at(slot));
  }
}

}  // namespace baton::runtime
