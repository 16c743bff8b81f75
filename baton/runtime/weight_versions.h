// Weight versions for schedules without a flush (Schedule::carries): one
// mechanism for PipeDream-2BW's double buffering (2bw) and PipeDream's weight
// stashing (pipedream), kept by the executor.
//
// Each parameter has a master, the tensor the caller's optimizer steps
// (Executor::parameters()), and the module's own parameter P, which the stage
// computes with and whose data this class points at one version or another
// (P.set_data()) before each compute action. P and the master are separate
// tensors: the optimizer's in-place update must not bump the version counter
// that autograd saved with P. A version is a set of storages; a micro-batch
// runs its forward and its backward on one version. Before the master is
// updated while some micro-batch still needs its current storage, the master
// moves to a copy, so the update cannot reach what those backwards read
// (through P and through the views saved in their graphs).
//
// PerStep (2bw): every micro-batch of step t runs on the masters' values when
// step t began; the caller's optimizer steps after each step. Each step's
// backwards accumulate into that step's own buffers, and when step t ends the
// masters' gradients are step t - 1's, now whole (its carried backwards ran
// in step t): the update after step t is W(t+1) = W(t) - lr * grad f(W(t-1)),
// the 2BW paper's. After the first step the masters have no gradient (an
// optimizer skips them). At most two versions: the masters' and, while
// carried backwards are pending, the previous step's.
//
// PerMicrobatch (pipedream): a micro-batch's forward runs on the masters'
// current values and its backward on the same version (weight stashing), and
// right after each backward the stage's masters hold that micro-batch's
// gradient (its share of the mini-batch's mean loss, as in every schedule)
// and `update` (the caller's optimizer step) runs. Rank r of p holds up to
// p - r versions, one per micro-batch in flight.
//
// The update is called with a factor on the learning rate: 1, except under
// PipeMare's warm-up.
#pragma once

#include <torch/types.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "baton/runtime/pipemare.h"

namespace baton::runtime {

// What PipeMare needs besides its options: each group's delay (its stage's,
// schedule/update_delays.h), in the order of the groups given, and the
// micro-batches per step (T1's warm-up is given in steps).
struct PipeMarePlan {
  PipeMareOptions options;
  std::vector<int> delays;
  int microbatches = 1;
};

class WeightVersions {
 public:
  // PerMicrobatchUnstashed (async): as PerMicrobatch, but the masters never
  // move: a backward reads the weights as they are when it runs (through P
  // and through the views its graph saved, which share the masters' storage),
  // so there is one version.
  // PipeMare (pipemare, runtime/pipemare.h): as PerMicrobatchUnstashed, with
  // each update's learning rate scaled by T1's factor, and, on a stage with
  // T2 and a delay, P pointing at a copy of the weights that holds the
  // masters' values during a forward and the masters extrapolated back by
  // the delay times the velocity during a backward (two versions: that copy
  // and the masters).
  enum class Updates { PerStep, PerMicrobatch, PerMicrobatchUnstashed, PipeMare };

  // Takes the stages' parameters (module parameters, in Executor::parameters()
  // order, grouped by stage) and makes their masters. `pipemare` is read by
  // Updates::PipeMare only (its delays: one per group).
  WeightVersions(std::vector<std::vector<torch::Tensor>> stage_parameters, Updates updates,
                 const PipeMarePlan& pipemare = {});

  Updates updates() const { return updates_; }
  // The masters, in the order given.
  std::vector<torch::Tensor> masters() const;
  // Per micro-batch updates: the optimizer step run after each backward,
  // given a factor on its learning rate (lr_scale; 1 but under PipeMare's T1).
  void set_update(std::function<void(double lr_scale)> update) { update_ = std::move(update); }
  bool has_update() const { return static_cast<bool>(update_); }

  // Before a compute action of stage `group` (index into the groups given) on
  // micro-batch cell `cell` (any key unique per stage and micro-batch):
  // `carried` marks a backward of the previous step's micro-batch (PerStep).
  void before(size_t group, bool forward, size_t cell, bool carried);
  // After a backward (B) of `cell`: PerMicrobatch updates the stage.
  void after_backward(size_t group, size_t cell);
  // Every stage on the masters' values (evaluation).
  void use_latest();

  // PerStep: the step's actions have run. `carry_next`: micro-batches of this
  // step carry backwards into the next. `previous_whole`: a previous step's
  // gradients are now complete (false after the first step).
  void end_step(bool carry_next, bool previous_whole);

  // Weight versions held now by the stage holding most, measured as distinct
  // storages per parameter.
  int held() const;

 private:
  using Version = std::shared_ptr<std::vector<torch::Tensor>>;  // one storage per parameter
  struct Group {
    std::vector<torch::Tensor> module;  // P: what the stage computes with
    std::vector<torch::Tensor> master;  // M: what the optimizer steps
    // PerStep: the previous step's version while carried backwards need it,
    // and the gradient buffers of the current and previous steps.
    std::vector<torch::Tensor> stashed, grad_current, grad_previous;
    // PerMicrobatch: the version each micro-batch in flight runs on, the
    // masters' (null until a forward takes it), and the gradient buffers.
    std::map<size_t, Version> in_flight;
    Version current;
    std::vector<torch::Tensor> grad;
    // Storages of versions no micro-batch needs any more, reused by the next
    // move (no allocation or page faults per update).
    std::vector<std::vector<torch::Tensor>> pool;
    // PipeMare: the stage's state, and its computed-with copy as a version.
    std::unique_ptr<PipeMareStage> pipemare;
    Version corrected;
  };
  void point(Group& g, const std::vector<torch::Tensor>& data);
  void move_masters_if_shared(Group& g);

  Updates updates_;
  std::vector<Group> groups_;
  std::function<void(double)> update_;
};

}  // namespace baton::runtime
