#include "baton/runtime/weight_versions.h"

#include <algorithm>
#include <set>

#include "baton/comm/memory_counter.h"
#include "baton/core/error.h"

namespace baton::runtime {

namespace {

// The versions are weights and the buffers gradients, in the counting
// allocator's categories as in the model's (sim/memory_model.h): charged
// where they are made, whatever scope the caller is in.
using Charged = comm::MemoryCategoryScope;
constexpr comm::MemoryCategory kWeights = comm::MemoryCategory::kParameters;
constexpr comm::MemoryCategory kGradientBuffers = comm::MemoryCategory::kGradients;

}  // namespace

WeightVersions::WeightVersions(std::vector<std::vector<torch::Tensor>> stage_parameters,
                               Updates updates, const PipeMarePlan& pipemare)
    : updates_(updates) {
  BATON_ASSERT(updates != Updates::PipeMare || pipemare.delays.size() == stage_parameters.size(),
               "PipeMare with ", pipemare.delays.size(), " delays for ", stage_parameters.size(),
               " stages");
  torch::NoGradGuard no_grad;
  for (auto& params : stage_parameters) {
    Group g;
    for (auto& p : params) {
      g.module.push_back(p);
      {
        // A tensor of its own (own version counter), holding the same values.
        Charged weights(kWeights);
        g.master.push_back(p.detach().clone().set_requires_grad(p.requires_grad()));
        p.set_data(g.master.back().detach());
      }
      // The gradient buffers each policy uses: the current step's (PerStep), or
      // the one micro-batch's (PerMicrobatch*).
      Charged gradients(kGradientBuffers);
      (updates_ == Updates::PerStep ? g.grad_current : g.grad).push_back(torch::zeros_like(p));
    }
    g.stashed.resize(g.module.size());
    g.grad_previous.resize(g.module.size());
    if (updates_ != Updates::PerStep) g.grad_current.resize(g.module.size());
    if (updates_ == Updates::PipeMare) {
      const int delay = pipemare.delays[groups_.size()];
      g.pipemare = std::make_unique<PipeMareStage>(
          g.master, delay, pipemare.options.warmup_steps() * pipemare.microbatches,
          pipemare.options);
      if (g.pipemare->corrects())
        g.corrected = std::make_shared<std::vector<torch::Tensor>>(g.pipemare->forward_weights());
    }
    groups_.push_back(std::move(g));
  }
}

std::vector<torch::Tensor> WeightVersions::masters() const {
  std::vector<torch::Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.master.begin(), g.master.end());
  return out;
}

void WeightVersions::point(Group& g, const std::vector<torch::Tensor>& data) {
  for (size_t i = 0; i < g.module.size(); ++i) g.module[i].set_data(data[i]);
}

void WeightVersions::before(size_t group, bool forward, size_t cell, bool carried) {
  BATON_ASSERT(group < groups_.size(), "no parameter group ", group);
  Group& g = groups_[group];
  if (updates_ == Updates::PerStep) {
    BATON_ASSERT(!carried || g.module.empty() || g.stashed[0].defined(),
                 "a carried backward without the previous step's weight version");
    if (carried) {
      point(g, g.stashed);
    } else {
      for (size_t i = 0; i < g.module.size(); ++i) g.module[i].set_data(g.master[i].detach());
    }
    const auto& grads = carried ? g.grad_previous : g.grad_current;
    for (size_t i = 0; i < g.module.size(); ++i) g.module[i].mutable_grad() = grads[i];
    return;
  }
  if (g.corrected) {
    // PipeMare's T2: P computes on a copy, the masters' values for a forward
    // and the extrapolated ones for a backward (runtime/pipemare.h).
    point(g, forward ? g.pipemare->forward_weights() : g.pipemare->backward_weights());
    if (forward) {
      g.in_flight[cell] = g.corrected;
    } else {
      for (size_t i = 0; i < g.module.size(); ++i) g.module[i].mutable_grad() = g.grad[i];
    }
    return;
  }
  if (forward) {
    if (!g.current) {
      g.current = std::make_shared<std::vector<torch::Tensor>>();
      for (auto& m : g.master) g.current->push_back(m.detach());
    }
    g.in_flight[cell] = g.current;
    point(g, *g.current);
    return;
  }
  auto found = g.in_flight.find(cell);
  BATON_ASSERT(found != g.in_flight.end(), "a backward without its forward's weight version");
  point(g, *found->second);
  for (size_t i = 0; i < g.module.size(); ++i) g.module[i].mutable_grad() = g.grad[i];
}

void WeightVersions::move_masters_if_shared(Group& g) {
  // Some micro-batch in flight still runs on the masters' storage: the
  // masters move to a copy, the micro-batches keep the old one (weight
  // stashing; async does not stash).
  if (updates_ == Updates::PerMicrobatchUnstashed || updates_ == Updates::PipeMare || !g.current ||
      g.current.use_count() == 1)
    return;
  torch::NoGradGuard no_grad;
  Charged weights(kWeights);
  std::vector<torch::Tensor> free;
  if (!g.pool.empty()) {
    free = std::move(g.pool.back());
    g.pool.pop_back();
  }
  for (size_t i = 0; i < g.master.size(); ++i) {
    torch::Tensor& m = g.master[i];
    m.set_data(free.empty() ? m.detach().clone() : free[i].copy_(m.detach()));
  }
  g.current.reset();
}

void WeightVersions::after_backward(size_t group, size_t cell) {
  if (updates_ == Updates::PerStep) return;
  BATON_CHECK(update_,
              "[runtime.weights] this schedule updates the weights after every "
              "micro-batch's backward: give the Pipeline your optimizer (Pipeline::set_optimizer) "
              "before step()");
  Group& g = groups_[group];
  auto done = g.in_flight.find(cell);
  if (done != g.in_flight.end()) {
    Version version = std::move(done->second);
    g.in_flight.erase(done);
    // The last micro-batch on an old version: its storages go to the pool.
    if (version.use_count() == 1 && version != g.current) g.pool.push_back(std::move(*version));
  }
  move_masters_if_shared(g);
  // Only this stage's masters carry a gradient into the update.
  for (auto& other : groups_)
    for (auto& m : other.master) m.mutable_grad() = torch::Tensor();
  for (size_t i = 0; i < g.master.size(); ++i) g.master[i].mutable_grad() = g.grad[i];
  const double lr_scale = g.pipemare ? g.pipemare->begin_update() : 1;
  update_(lr_scale);
  if (g.pipemare) g.pipemare->end_update();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < g.master.size(); ++i) {
    g.master[i].mutable_grad() = torch::Tensor();
    g.grad[i].zero_();
  }
}

void WeightVersions::use_latest() {
  for (auto& g : groups_)
    for (size_t i = 0; i < g.module.size(); ++i) g.module[i].set_data(g.master[i].detach());
}

void WeightVersions::end_step(bool carry_next, bool previous_whole) {
  if (updates_ != Updates::PerStep) return;
  torch::NoGradGuard no_grad;
  for (auto& g : groups_) {
    for (size_t i = 0; i < g.master.size(); ++i) {
      torch::Tensor& master = g.master[i];
      // The buffer the masters' gradients were (step t - 2's, applied by now)
      // becomes this step's fresh one: no allocation, no page faults.
      torch::Tensor spare = master.grad();
      master.mutable_grad() = previous_whole ? g.grad_previous[i] : torch::Tensor();
      g.grad_previous[i] = g.grad_current[i];
      if (!spare.defined() || spare.is_same(g.grad_previous[i]) || spare.is_same(master.grad())) {
        Charged gradients(kGradientBuffers);
        spare = torch::empty_like(master);
      }
      g.grad_current[i] = spare.zero_();
      if (carry_next) {
        // This step's version stays where its graphs read it; the master moves
        // to a copy (into the storage of the version stashed a step ago, whose
        // backwards have run), which the caller's optimizer may step in place.
        Charged weights(kWeights);
        torch::Tensor free = g.stashed[i].defined() ? g.stashed[i] : torch::empty_like(master);
        g.stashed[i] = master.detach();
        master.set_data(free.copy_(g.stashed[i]));
      } else {
        g.stashed[i] = torch::Tensor();
      }
    }
  }
}

int WeightVersions::held() const {
  size_t most = groups_.empty() ? 0 : 1;
  for (const auto& g : groups_) {
    if (g.master.empty()) continue;
    std::set<const void*> storages;
    for (size_t i = 0; i < g.master.size(); ++i) {
      storages.insert(g.master[i].storage().data());
      if (g.stashed[i].defined()) storages.insert(g.stashed[i].storage().data());
    }
    for (const auto& [cell, version] : g.in_flight)
      for (const auto& t : *version) storages.insert(t.storage().data());
    for (const auto& spare : g.pool)  // held as well, though no micro-batch needs them
      for (const auto& t : spare) storages.insert(t.storage().data());
    if (g.corrected)  // PipeMare's computed-with copy, always held
      for (const auto& t : *g.corrected) storages.insert(t.storage().data());
    // Each parameter holds one storage per version.
    most = std::max(most, storages.size() / g.master.size());
  }
  return static_cast<int>(most);
}

}  // namespace baton::runtime
