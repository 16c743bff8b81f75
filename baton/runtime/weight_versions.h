// Weight versions for schedules without a flush (Schedule::carries, 2bw):
// PipeDream-2BW's double buffering, kept by the executor.
//
// Each parameter has a master, the tensor the caller's optimizer steps
// (Executor::parameters()), and the module's own parameter, which the stage
// computes with and whose data this class points at one version or another.
// A micro-batch runs its forward and its backward on one version: the
// masters' values when its step started. A backward carried into the next
// step (after the caller's optimizer has stepped the masters) runs on the
// stashed old version. So at most two versions are held: the masters' and,
// while carried backwards are pending, the previous step's.
//
// Gradients: each step's backwards accumulate into that step's own buffers;
// when a step ends, the masters' gradients are the PREVIOUS step's, now whole
// (its carried backwards have run). The caller's optimizer, stepping after
// step t, applies the gradient of step t - 1, computed on the weights of step
// t - 1: W(t+1) = W(t) - lr * grad f(W(t-1)), the 2BW paper's update. After the
// first step the masters have no gradient (an optimizer skips them).
//
// How: the module's parameter P and the master M are separate tensors (the
// optimizer's in-place update must not bump the version counter of the P that
// autograd saved), and P.set_data() switches P between the storages. When a
// step ends with backwards still to carry, M moves to a fresh copy of its
// storage, so the caller's update cannot reach the old one those backwards
// read (through P and through views saved in their graphs).
#pragma once

#include <torch/types.h>

#include <vector>

namespace baton::runtime {

class WeightVersions {
 public:
  // Takes the stages' parameters (module parameters, in Executor::parameters()
  // order, grouped by stage) and makes their masters.
  explicit WeightVersions(std::vector<std::vector<torch::Tensor>> stage_parameters);

  // The masters, in the order given.
  std::vector<torch::Tensor> masters() const;

  // Before a compute action of stage `group` (index into the groups given):
  // its parameters' data and gradient buffers for the current step's
  // micro-batches, or for the previous step's (`carried`).
  void use(size_t group, bool carried);
  // Every stage on the masters' values (evaluation).
  void use_latest();

  // The step's actions have run. `carry_next`: micro-batches of this step
  // carry backwards into the next. `previous_whole`: a previous step's
  // gradients are now complete (false after the first step).
  void end_step(bool carry_next, bool previous_whole);

  // Weight versions held now by the stage holding most: distinct storages per
  // parameter (1, or 2 while a version is stashed), measured.
  int held() const;

 private:
  struct Param {
    torch::Tensor module;  // P: what the stage computes with
    torch::Tensor master;  // M: what the optimizer steps
    torch::Tensor stashed; // the previous step's version, while carried backwards need it
    torch::Tensor grad_current, grad_previous;
  };
  std::vector<std::vector<Param>> groups_;
};

}  // namespace baton::runtime
