#include "baton/runtime/weight_versions.h"

#include <algorithm>
#include <set>

#include "baton/core/error.h"

namespace baton::runtime {

WeightVersions::WeightVersions(std::vector<std::vector<torch::Tensor>> stage_parameters) {
  torch::NoGradGuard no_grad;
  for (auto& params : stage_parameters) {
    std::vector<Param> group;
    for (auto& p : params) {
      Param q;
      q.module = p;
      // A tensor of its own (own version counter), holding the same values.
      q.master = p.detach().clone().set_requires_grad(p.requires_grad());
      q.module.set_data(q.master.detach());
      q.grad_current = torch::zeros_like(q.master);
      group.push_back(std::move(q));
    }
    groups_.push_back(std::move(group));
  }
}

std::vector<torch::Tensor> WeightVersions::masters() const {
  std::vector<torch::Tensor> out;
  for (const auto& group : groups_)
    for (const auto& q : group) out.push_back(q.master);
  return out;
}

void WeightVersions::use(size_t group, bool carried) {
  BATON_ASSERT(group < groups_.size(), "no parameter group ", group);
  for (auto& q : groups_[group]) {
    if (carried) {
      BATON_ASSERT(q.stashed.defined() && q.grad_previous.defined(),
                   "a carried backward without a stashed weight version");
      q.module.set_data(q.stashed);
      q.module.mutable_grad() = q.grad_previous;
    } else {
      q.module.set_data(q.master.detach());
      q.module.mutable_grad() = q.grad_current;
    }
  }
}

void WeightVersions::use_latest() {
  for (auto& group : groups_)
    for (auto& q : group) q.module.set_data(q.master.detach());
}

void WeightVersions::end_step(bool carry_next, bool previous_whole) {
  torch::NoGradGuard no_grad;
  for (auto& group : groups_) {
    for (auto& q : group) {
      // The buffer the masters' gradients were (step t - 2's, applied by now)
      // becomes this step's fresh one: no allocation, no page faults.
      torch::Tensor spare = q.master.grad();
      q.master.mutable_grad() = previous_whole ? q.grad_previous : torch::Tensor();
      q.grad_previous = q.grad_current;
      if (!spare.defined() || spare.is_same(q.grad_previous) || spare.is_same(q.master.grad()))
        spare = torch::empty_like(q.master);
      q.grad_current = spare.zero_();
      if (carry_next) {
        // This step's version stays where its graphs read it; the master
        // moves to a copy (into the storage of the version stashed a step
        // ago, whose backwards have run), which the caller's optimizer may
        // step in place.
        torch::Tensor free = q.stashed.defined() ? q.stashed : torch::empty_like(q.master);
        q.stashed = q.master.detach();
        q.master.set_data(free.copy_(q.stashed));
      } else {
        q.stashed = torch::Tensor();
      }
    }
  }
}

int WeightVersions::held() const {
  size_t most = groups_.empty() ? 0 : 1;
  for (const auto& group : groups_) {
    std::set<const void*> storages;
    for (const auto& q : group) {
      storages.insert(q.master.storage().data());
      if (q.stashed.defined()) storages.insert(q.stashed.storage().data());
    }
    // Each parameter holds one storage per version.
    if (!group.empty()) most = std::max(most, storages.size() / group.size());
  }
  return static_cast<int>(most);
}

}  // namespace baton::runtime
