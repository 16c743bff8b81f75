#include "baton/runtime/carries.h"

#include <algorithm>
#include <set>
#include <utility>

#include "baton/core/error.h"
#include "baton/schedule/unroll.h"
#include "baton/schedule/update_delays.h"

namespace baton::runtime {

using schedule::Action;
using schedule::ActionKind;

Carries::Carries(const schedule::Schedule& schedule, int rank,
                 const std::map<int, std::shared_ptr<Stage>>& stages, Recompute recompute,
                 const PipeMareOptions& pipemare)
    : carries_(schedule.carries),
      carried_(schedule::carried_actions(schedule)[static_cast<size_t>(rank)]) {
  if (!carries_) return;
  const auto& actions = schedule.actions[static_cast<size_t>(rank)];
  std::set<size_t> cells;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (!carried_[i]) continue;
    const Action& a = actions[i];
    cells.insert(static_cast<size_t>(a.stage) * schedule.microbatches + a.microbatch);
    BATON_CHECK(a.stage != schedule.stages - 1 || recompute == Recompute::Never ||
                    recompute == Recompute::Selective,
                "[runtime.executor] schedule \"", schedule.name, "\" carries the last stage's ",
                "backward into the next step, which cannot recompute its loss; use recompute ",
                "never or selective");
  }
  carried_cells_.assign(cells.begin(), cells.end());
  // A carried backward of a stage that stashes or pops a skip needs that
  // skip's tensor of the micro-batch next step: its stash to seed, or the
  // leaf whose gradient it sends back.
  std::set<size_t> slots;
  const size_t m = static_cast<size_t>(schedule.microbatches);
  for (size_t c : carried_cells_) {
    const int s = static_cast<int>(c / m);
    for (size_t k = 0; k < schedule.skips.size(); ++k) {
      if (schedule.skips[k].from == s || schedule.skips[k].to == s) slots.insert(k * m + c % m);
    }
  }
  carried_skip_slots_.assign(slots.begin(), slots.end());
  // The schedule's property (schedule.h's WeightUpdates): pipedream
  // stashes a version per micro-batch and updates after each backward, async
  // updates alike without stashing, pipemare as async with PipeMare's
  // techniques; any other window double-buffers per step (2bw).
  using Updates = WeightVersions::Updates;
  using schedule::WeightUpdates;
  const auto updates = schedule.updates == WeightUpdates::kPerMicrobatch ? Updates::PerMicrobatch
                       : schedule.updates == WeightUpdates::kPerMicrobatchUnstashed
                           ? Updates::PerMicrobatchUnstashed
                       : schedule.updates == WeightUpdates::kPipeMare ? Updates::PipeMare
                                                                      : Updates::PerStep;
  PipeMarePlan plan{pipemare, {}, schedule.microbatches};
  const std::vector<int> delays =
      updates == Updates::PipeMare ? schedule::update_delays(schedule) : std::vector<int>{};
  std::vector<std::vector<torch::Tensor>> groups;
  for (const auto& [index, stage] : stages) {
    version_group_[index] = groups.size();
    groups.push_back(stage->parameters());
    if (!delays.empty()) plan.delays.push_back(delays.at(static_cast<size_t>(index)));
  }
  versions_ = std::make_unique<WeightVersions>(std::move(groups), updates, plan);
}

void Carries::restore(detail::Step& step) {
  step.carried_in = carry_.has_value();
  if (carry_) {
    for (size_t k = 0; k < carry_->cells.size(); ++k) {
      const size_t c = carry_->cells[k];
      step.input[c] = std::move(carry_->input[k]);
      step.output[c] = std::move(carry_->output[k]);
      step.activation_bytes[c] = carry_->bytes[k];
      step.stashed_bytes += carry_->bytes[k];
    }
    for (size_t k = 0; k < carried_skip_slots_.size(); ++k) {
      const size_t slot = carried_skip_slots_[k];
      step.skip_in[slot] = std::move(carry_->skip_in[k]);
      step.skip_out[slot] = std::move(carry_->skip_out[k]);
    }
    step.result.peak_activation_bytes = step.stashed_bytes;
    carry_.reset();
  }
  if (versions_) step.result.weight_versions = versions_->held();
}

void Carries::before(const detail::Step& step, const Action& a, size_t index) {
  if (!versions_ || !schedule::is_compute(a.kind)) return;
  versions_->before(version_group_.at(a.stage), a.kind == ActionKind::F,
                    step.cell(a.stage, a.microbatch), carried_[index]);
}

void Carries::after(const detail::Step& step, const Action& a) {
  if (!versions_ || a.kind != ActionKind::B) return;
  versions_->after_backward(version_group_.at(a.stage), step.cell(a.stage, a.microbatch));
}

void Carries::end_step(detail::Step& step) {
  if (carries_ && !step.drain_only) {
    Carry carry;
    for (size_t c : carried_cells_) {
      carry.cells.push_back(c);
      carry.input.push_back(std::move(step.input[c]));
      carry.output.push_back(std::move(step.output[c]));
      carry.bytes.push_back(step.activation_bytes[c]);
    }
    for (size_t slot : carried_skip_slots_) {
      carry.skip_in.push_back(std::move(step.skip_in[slot]));
      carry.skip_out.push_back(std::move(step.skip_out[slot]));
    }
    carry_ = std::move(carry);
  }
  if (versions_) {
    versions_->end_step(/*carry_next=*/carry_.has_value() && !carried_cells_.empty(),
                        /*previous_whole=*/step.carried_in);
    step.result.weight_versions = std::max(step.result.weight_versions, versions_->held());
  }
}

}  // namespace baton::runtime
