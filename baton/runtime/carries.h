// The carries between steps of a schedule without a flush (Schedule::carries:
// 2bw, pipedream, async, pipemare). The micro-batches whose backwards a rank carries
// into the next step keep their stage input and output (and autograd graph),
// and the skip tensors their stages stashed or popped for them,
// here between steps, and the weight versions (runtime/weight_versions.h)
// they run on live here: parameters() are then the masters the caller's
// optimizer steps. For a schedule with a flush nothing is carried, and every
// call below is the identity.
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "baton/nn/layer_call.h"
#include "baton/runtime/executor.h"
#include "baton/runtime/stage.h"
#include "baton/runtime/step.h"
#include "baton/runtime/weight_versions.h"
#include "baton/schedule/schedule.h"

namespace baton::runtime {

class Carries {
 public:
  // Throws baton::Error when the schedule carries the last stage's backward
  // and `recompute` is not Never (the loss cannot be recomputed a step later).
  // `pipemare` is read by schedule "pipemare" only.
  Carries(const schedule::Schedule& schedule, int rank,
          const std::map<int, std::shared_ptr<Stage>>& stages, Recompute recompute,
          const PipeMareOptions& pipemare = {});

  // Whether a step skips this rank's action `index`: a carried one when
  // nothing was carried in, and in a drain every action but a carried one.
  bool skipped(const detail::Step& step, size_t index) const {
    return carried_[index] ? !step.carried_in : step.drain_only;
  }
  // Whether the last step left backwards for the next step or a drain.
  bool pending() const { return carry_.has_value(); }
  // The weight versions; null for a schedule with a flush.
  WeightVersions* versions() const { return versions_.get(); }

  // At a training step's start: moves what the last step left into `step`
  // and sets step.carried_in.
  void restore(detail::Step& step);
  // Around compute action `index` (action `a`) of this rank: points its
  // stage at the version the micro-batch runs on; a B's update (pipedream,
  // async, pipemare).
  void before(const detail::Step& step, const schedule::Action& a, size_t index);
  void after(const detail::Step& step, const schedule::Action& a);
  // At a training step's end (after its reductions): keeps the carried cells
  // for the next step (unless draining) and ends the versions' step.
  void end_step(detail::Step& step);

 private:
  // The stage input, output and stashed bytes of each carried cell, and
  // the skip connections' tensors of its micro-batch (Step::skip_in: the
  // popping stage's leaf; Step::skip_out: the stashing stage's output).
  struct Carry {
    std::vector<size_t> cells;
    std::vector<nn::Tensors> input, output;
    std::vector<double> bytes;
    std::vector<torch::Tensor> skip_in, skip_out;
  };

  bool carries_;
  // Which of this rank's actions are carried, the cells they carry, and what
  // the last step left them.
  std::vector<bool> carried_;
  std::vector<size_t> carried_cells_;
  // The (skip, micro-batch) slots (Step::skip_cell) whose stashing or
  // popping stage's cell is carried.
  std::vector<size_t> carried_skip_slots_;
  std::optional<Carry> carry_;
  std::unique_ptr<WeightVersions> versions_;
  std::map<int, size_t> version_group_;  // stage -> index into versions_' groups
};

}  // namespace baton::runtime
