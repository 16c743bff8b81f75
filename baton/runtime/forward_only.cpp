// Executor::evaluate (runtime/executor.h): evaluation as a forward-only
// schedule, run by the executor's one interpreter.
#include <algorithm>

#include "baton/core/error.h"
#include "baton/runtime/executor.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/step.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/lower.h"

namespace baton::runtime {

using schedule::Action;
using schedule::ActionKind;

std::map<int, torch::Tensor> Executor::evaluate(const torch::Tensor& inputs, int microbatches) {
  return evaluate(inputs.defined() ? nn::Tensors{inputs} : nn::Tensors{}, microbatches);
}

std::map<int, torch::Tensor> Executor::evaluate(const nn::Tensors& inputs, int microbatches) {
  torch::NoGradGuard no_grad;
  if (versions()) versions()->use_latest();  // evaluate the masters' weights
  auto found = forward_only_.find(microbatches);
  if (found == forward_only_.end()) {
    schedule::Schedule lowered = schedule::lower(schedule::forward_only(schedule_, microbatches));
    schedule::Placement placement(lowered);
    found = forward_only_.emplace(microbatches, Program{std::move(lowered), std::move(placement)})
                .first;
  }
  const Program& program = found->second;
  BATON_ASSERT(program.schedule.forward_only, "schedule ", program.schedule.name,
               " is not forward-only");
  const std::vector<Action>& actions = program.schedule.actions[rank_];
  Step step(program.schedule, program.placement, /*drain_only=*/false);
  const bool first_stage = std::any_of(actions.begin(), actions.end(), [](const Action& a) {
    return a.kind == ActionKind::F && a.stage == 0;
  });
  if (first_stage) step.inputs = split(inputs, microbatches);
  {
    AutocastScope autocast(options_.precision, options_.device);
    interpret(step);
  }
  for (auto& send : step.sends) send.wait("an evaluation send");
  std::map<int, torch::Tensor> outputs;
  for (const Action& a : actions) {
    if (a.kind == ActionKind::F && a.stage == step.stages - 1)
      outputs[a.microbatch] = step.output[step.cell(a.stage, a.microbatch)].front();
  }
  return outputs;
}

}  // namespace baton::runtime
