#include "baton/runtime/executor.h"

#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "baton/core/error.h"
#include "baton/runtime/microbatch.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/grad_reduction.h"
#include "baton/schedule/lower.h"
#include "baton/schedule/unroll.h"

namespace baton::runtime {

using schedule::Action;
using schedule::ActionKind;
using Clock = std::chrono::steady_clock;

Recompute parse_recompute(std::string_view text) {
  if (text == "never") return Recompute::Never;
  if (text == "except_last" || text == "except-last") return Recompute::ExceptLast;
  if (text == "always") return Recompute::Always;
  BATON_CHECK(false, "[runtime.recompute] unknown recompute mode \"", text,
              "\" (expected never, except_last or always)");
  return Recompute::Never;
}

std::string_view to_string(Recompute recompute) {
  switch (recompute) {
    case Recompute::Never: return "never";
    case Recompute::ExceptLast: return "except_last";
    case Recompute::Always: return "always";
  }
  return "never";
}

// Everything one step holds, per (stage, micro-batch) cell.
struct Executor::Step {
  int stages, microbatches;
  std::vector<torch::Tensor> inputs, targets;  // micro-batches of the mini-batch
  std::vector<double> scales;
  std::vector<torch::Tensor> input;        // the stage's input (a leaf when it needs a gradient)
  std::vector<torch::Tensor> output;       // the stage's output, or the scaled loss on the last stage
  std::vector<torch::Tensor> grad_output;  // gradient of the loss w.r.t. `output`
  std::vector<torch::Tensor> grad_input;   // gradient to send to the previous stage
  std::vector<double> activation_bytes;
  std::vector<std::optional<comm::RecvHandle>> recv_forward, recv_backward;
  std::map<int, comm::RecvHandle> recv_loss;  // by sending rank
  std::vector<comm::SendHandle> sends;
  std::vector<comm::ReduceHandle> reductions;  // REDUCE_GRADs in flight
  // On a CUDA device the scaled losses add up on the device, read once at the
  // end of the step (on the CPU they go straight into result.loss).
  torch::Tensor device_loss;
  double stashed_bytes = 0;
  StepResult result;
  Clock::time_point start;

  Step(int s, int m)
      : stages(s), microbatches(m), input(s * m), output(s * m), grad_output(s * m),
        grad_input(s * m), activation_bytes(s * m, 0), recv_forward(s * m), recv_backward(s * m) {}
  size_t cell(int s, int mb) const { return static_cast<size_t>(s) * microbatches + mb; }
};

Executor::Executor(schedule::Schedule schedule, int rank, std::vector<std::shared_ptr<Stage>> stages,
                   LossFn loss, comm::Communicator* comm, ExecutorOptions options)
    : schedule_(std::move(schedule)),
      placement_(schedule_),
      rank_(rank),
      loss_(std::move(loss)),
      comm_(comm),
      options_(options) {
  BATON_CHECK(rank >= 0 && rank < schedule_.ranks, "[runtime.executor] rank ", rank,
              " is outside the schedule's ", schedule_.ranks, " ranks");
  for (auto& stage : stages) stages_[stage->index()] = std::move(stage);
  for (int s : placement_.stages_of_rank(rank)) {
    BATON_CHECK(stages_.count(s), "[runtime.executor] rank ", rank, " runs stage ", s,
                " in schedule \"", schedule_.name, "\" but was given no module for it");
  }
  BATON_CHECK(comm_ != nullptr || schedule_.ranks == 1,
              "[runtime.executor] a schedule over ", schedule_.ranks, " ranks needs a communicator");
  loss_ranks_ = placement_.ranks_of_stage(schedule_.stages - 1);
  std::sort(loss_ranks_.begin(), loss_ranks_.end());
  const auto& actions = schedule_.actions[rank_];
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].kind == ActionKind::F && actions[i].stage == schedule_.stages - 1)
      last_loss_forward_ = i;
  }
  BATON_CHECK(options_.world_ranks.empty() ||
                  static_cast<int>(options_.world_ranks.size()) == schedule_.ranks,
              "[runtime.executor] ", options_.world_ranks.size(), " world ranks for a schedule over ",
              schedule_.ranks, " ranks; give one per pipeline rank");
  if (options_.dp_group != nullptr) {
    for (const auto& [index, stage] : stages_) {
      std::vector<double> bytes;
      for (const auto& p : stage->parameters()) bytes.push_back(static_cast<double>(p.nbytes()));
      buckets_[index] = schedule::gradient_bucket_members(bytes, options_.bucket_bytes);
    }
    // Every bucket must be reduced exactly once, or replicas would step apart.
    std::map<int, int> reductions;
    for (const Action& a : schedule_.actions[rank_]) reductions[a.stage] += a.kind == ActionKind::REDUCE_GRAD;
    for (const auto& [index, buckets] : buckets_) {
      const int expected = std::max(1, static_cast<int>(buckets.size()));
      BATON_CHECK(reductions[index] == expected, "[runtime.executor] rank ", rank, ": stage ", index,
                  " has ", buckets.size(), " gradient bucket(s) of ", options_.bucket_bytes / (1 << 20),
                  " MiB but schedule \"", schedule_.name, "\" reduces it in ", reductions[index],
                  " REDUCE_GRAD action(s)");
    }
  }
  build_tie_groups();
  carried_ = schedule::carried_actions(schedule_)[static_cast<size_t>(rank_)];
  if (schedule_.carries) {
    std::set<size_t> cells;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (!carried_[i]) continue;
      const Action& a = actions[i];
      cells.insert(static_cast<size_t>(a.stage) * schedule_.microbatches + a.microbatch);
      BATON_CHECK(a.stage != schedule_.stages - 1 || options_.recompute == Recompute::Never,
                  "[runtime.executor] schedule \"", schedule_.name, "\" carries the last stage's ",
                  "backward into the next step, which cannot recompute its loss; use recompute never");
    }
    carried_cells_.assign(cells.begin(), cells.end());
    std::vector<std::vector<torch::Tensor>> groups;
    for (const auto& [index, stage] : stages_) {
      version_group_[index] = groups.size();
      groups.push_back(stage->parameters());
    }
    // pipedream (generated, or a file whose header names it) stashes a version
    // per micro-batch and updates after each backward, async updates alike
    // without stashing; any other window double-buffers per step (2bw).
    const auto updates = schedule_.name == "pipedream" ? WeightVersions::Updates::PerMicrobatch
                         : schedule_.name == "async"   ? WeightVersions::Updates::PerMicrobatchUnstashed
                                                       : WeightVersions::Updates::PerStep;
    versions_ = std::make_unique<WeightVersions>(std::move(groups), updates);
  }
}

namespace {

// The tag of the step's loss: a forward message of the last stage, which
// sends nothing forward otherwise (comm/tag.h).
comm::Tag loss_tag(int stages) {
  return comm::Tag{stages - 1, comm::kReservedMicrobatch, comm::Direction::kForward};
}

}  // namespace

void Executor::send_loss(Step& step) {
  // On a device the micro-batch losses so far are read back now, once.
  if (step.device_loss.defined()) {
    step.result.loss += step.device_loss.item<double>();
    step.device_loss = torch::Tensor();
  }
  if (!options_.share_loss || comm_ == nullptr) return;
  const torch::Tensor part = torch::tensor({step.result.loss}, torch::kFloat64);
  for (int r = 0; r < schedule_.ranks; ++r) {
    if (r != rank_) step.sends.push_back(comm_->isend(part, peer(r), loss_tag(schedule_.stages)));
  }
}

void Executor::gather_loss(Step& step) {
  if (!options_.share_loss && comm_ != nullptr) {
    const bool holds_last =
        std::find(loss_ranks_.begin(), loss_ranks_.end(), rank_) != loss_ranks_.end();
    step.result.minibatch_loss = holds_last && loss_ranks_.size() == 1
                                     ? step.result.loss
                                     : std::numeric_limits<double>::quiet_NaN();
    return;
  }
  // In rank order, so every rank adds the same numbers in the same order.
  double sum = 0;
  for (int r : loss_ranks_) {
    if (r == rank_) {
      sum += step.result.loss;
      continue;
    }
    const std::string what = baton::detail::concat(
        "the step ", steps_run_ + 1, " loss sum: the last stage's loss from rank ", r);
    sum += step.recv_loss.at(r).wait(what).item<double>();
  }
  step.result.minibatch_loss = sum;
}

int Executor::peer(int pipeline_rank) const {
  return options_.world_ranks.empty() ? pipeline_rank
                                      : options_.world_ranks[static_cast<size_t>(pipeline_rank)];
}

void Executor::start_reduction(Step& step, int s, int bucket) {
  const auto& buckets = buckets_.at(s);
  // A stage without parameters still has one (empty) bucket in the schedule.
  if (buckets.empty()) return;
  const auto params = stages_.at(s)->parameters();
  const double dp = options_.dp_group->world_size();
  std::vector<torch::Tensor> grads;
  BATON_ASSERT(bucket >= 0 && bucket < static_cast<int>(buckets.size()), "stage ", s, " has no bucket ", bucket);
  for (int i : buckets[static_cast<size_t>(bucket)]) {
    torch::Tensor p = params[static_cast<size_t>(i)];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    // DDP's order: divide, then sum, so the result is the replicas' mean.
    p.mutable_grad().div_(dp);
    grads.push_back(p.grad());
  }
  step.reductions.push_back(options_.dp_group->all_reduce_sum_async(
      std::move(grads), "stage " + std::to_string(s) + " gradient bucket " + std::to_string(bucket) +
                            " REDUCE_GRAD"));
}

std::vector<torch::Tensor> Executor::parameters() const {
  if (versions_) return versions_->masters();
  std::vector<torch::Tensor> out;
  for (const auto& [index, stage] : stages_)
    for (auto& p : stage->parameters()) out.push_back(p);
  return out;
}

torch::Tensor Executor::on_device(const torch::Tensor& tensor) const {
  if (!tensor.defined() || tensor.device() == options_.device) return tensor;
  // Host to device from pinned memory is asynchronous; every other move is a plain copy.
  if (tensor.device().is_cpu() && options_.device.is_cuda()) {
    return tensor.pin_memory().to(options_.device, /*non_blocking=*/true);
  }
  return tensor.to(options_.device);
}

std::string Executor::describe(const Action& action, int peer) const {
  std::string text = "stage " + std::to_string(action.stage) +
                     " micro-batch " + std::to_string(action.microbatch) + " " +
                     std::string(schedule::to_string(action.kind));
  if (peer >= 0) {
    const bool sends = action.kind == ActionKind::SEND_F || action.kind == ActionKind::SEND_B;
    text += (sends ? " to rank " : " from rank ") + std::to_string(peer);
  }
  return text;
}

torch::Tensor Executor::tp_scatter(const torch::Tensor& whole, const Action& action) const {
  if (options_.tp_group == nullptr || !options_.scatter_gather) return whole;
  const int t = options_.tp_group->world_size(), k = options_.tp_group->rank();
  BATON_CHECK(whole.dim() >= 1 && whole.size(-1) % t == 0, "[runtime.executor] scatter/gather over tp=", t,
              " needs boundary tensors whose last dimension tp divides; ", describe(action, -1), " sends ",
              whole.sizes(), " (turn scatter/gather off)");
  const int64_t d = whole.size(-1) / t;
  return whole.narrow(-1, k * d, d).contiguous();
}

torch::Tensor Executor::tp_gather(const torch::Tensor& slice, const Action& action) const {
  if (options_.tp_group == nullptr || !options_.scatter_gather) return slice;
  const int t = options_.tp_group->world_size(), k = options_.tp_group->rank();
  std::vector<int64_t> shape = slice.sizes().vec();
  const int64_t d = shape.back();
  shape.back() *= t;
  // Each rank fills its slice and zeros: the sum is the whole, exactly.
  std::vector<torch::Tensor> whole{torch::zeros(shape, slice.options())};
  whole[0].narrow(-1, k * d, d).copy_(slice);
  options_.tp_group->all_reduce_sum(whole, "the tensor-parallel gather of " + describe(action, -1));
  return whole[0];
}

StepResult Executor::run_step(const torch::Tensor& inputs, const torch::Tensor& targets) {
  return run(inputs, targets, /*drain_only=*/false);
}

StepResult Executor::drain() {
  if (!carry_) return {};
  return run(torch::Tensor(), torch::Tensor(), /*drain_only=*/true);
}

StepResult Executor::run(const torch::Tensor& inputs, const torch::Tensor& targets, bool drain_only) {
  const int S = schedule_.stages, m = schedule_.microbatches;
  Step step(S, m);
  step.start = Clock::now();
  step.result.start_ms =
      std::chrono::duration<double, std::milli>(step.start.time_since_epoch()).count();
  const auto& actions = schedule_.actions[rank_];
  // A schedule without a flush: the carried actions run on what the last
  // step left (none in a first step); a drain runs only them.
  const bool has_carry = carry_.has_value();
  auto skipped = [&](size_t i) { return carried_[i] ? !has_carry : drain_only; };
  if (has_carry) {
    for (size_t k = 0; k < carry_->cells.size(); ++k) {
      const size_t c = carry_->cells[k];
      step.input[c] = std::move(carry_->input[k]);
      step.output[c] = std::move(carry_->output[k]);
      step.activation_bytes[c] = carry_->bytes[k];
      step.stashed_bytes += carry_->bytes[k];
    }
    step.result.peak_activation_bytes = step.stashed_bytes;
    carry_.reset();
  }
  if (versions_) step.result.weight_versions = versions_->held();
  bool needs_inputs = false, needs_targets = false;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (skipped(i)) continue;
    needs_inputs |= actions[i].kind == ActionKind::F && actions[i].stage == 0;
    needs_targets |= actions[i].kind == ActionKind::F && actions[i].stage == S - 1;
  }
  if (needs_inputs) step.inputs = split_microbatches(on_device(inputs), m);
  if (needs_targets) {
    step.targets = split_microbatches(on_device(targets), m);
    step.scales = loss_scales(step.targets);
  }
  // Post every receive now, so data can land while this rank computes.
  if (options_.share_loss && comm_ != nullptr && !drain_only) {
    for (int r : loss_ranks_) {
      if (r != rank_) step.recv_loss.emplace(r, comm_->irecv(peer(r), loss_tag(S)));
    }
  }
  for (size_t i = 0; i < actions.size(); ++i) {
    if (skipped(i)) continue;
    const Action& a = actions[i];
    const size_t c = step.cell(a.stage, a.microbatch);
    if (a.kind == ActionKind::RECV_F) {
      step.recv_forward[c] = comm_->irecv(peer(placement_.rank_of(a.stage - 1, a.microbatch)),
                                          comm::Tag{a.stage - 1, a.microbatch, comm::Direction::kForward});
    } else if (a.kind == ActionKind::RECV_B) {
      step.recv_backward[c] = comm_->irecv(peer(placement_.rank_of(a.stage + 1, a.microbatch)),
                                           comm::Tag{a.stage + 1, a.microbatch, comm::Direction::kBackward});
    }
  }
  for (size_t i = 0; i < actions.size(); ++i) {
    if (skipped(i)) continue;
    const Action& a = actions[i];
    const bool versioned = versions_ && schedule::is_compute(a.kind);
    const size_t cell = static_cast<size_t>(a.stage) * m + a.microbatch;
    if (versioned) versions_->before(version_group_.at(a.stage), a.kind == ActionKind::F, cell, carried_[i]);
    run_action(step, i);
    if (versioned && a.kind == ActionKind::B) versions_->after_backward(version_group_.at(a.stage), cell);
    if (i == last_loss_forward_ && !drain_only) send_loss(step);
  }
  if (drain_only) {
    step.result.minibatch_loss = std::numeric_limits<double>::quiet_NaN();
  } else {
    gather_loss(step);
  }
  for (auto& send : step.sends) send.wait(baton::detail::concat("a send of step ", steps_run_ + 1));
  wait_reductions(step);
  if (schedule_.carries && !drain_only) {
    Carry carry;
    for (size_t c : carried_cells_) {
      carry.cells.push_back(c);
      carry.input.push_back(std::move(step.input[c]));
      carry.output.push_back(std::move(step.output[c]));
      carry.bytes.push_back(step.activation_bytes[c]);
    }
    carry_ = std::move(carry);
  }
  if (versions_) {
    versions_->end_step(/*carry_next=*/carry_.has_value() && !carried_cells_.empty(),
                        /*previous_whole=*/has_carry);
    step.result.weight_versions = std::max(step.result.weight_versions, versions_->held());
  }
  if (!drain_only) ++steps_run_;
  step.result.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - step.start).count();
  return std::move(step.result);
}

void Executor::run_action(Step& step, size_t index) {
  const Action& a = schedule_.actions[rank_][index];
  const int s = a.stage, mb = a.microbatch, S = schedule_.stages;
  const size_t c = step.cell(s, mb);
  const bool last = s == S - 1;
  const bool recomputed =
      options_.recompute == Recompute::Always ||
      (options_.recompute == Recompute::ExceptLast && mb + 1 < schedule_.microbatches);
  Stage* stage = schedule::is_compute(a.kind) ? stages_.at(s).get() : nullptr;
  const auto started = Clock::now();

  // Adds a micro-batch's scaled loss to the step's: at once on the CPU, on
  // the device otherwise (no device-to-host sync per micro-batch).
  auto count_loss = [&](const torch::Tensor& loss) {
    if (options_.device.is_cpu()) {
      step.result.loss += loss.item<double>();
    } else {
      torch::Tensor value = loss.detach().to(torch::kFloat64);
      step.device_loss = step.device_loss.defined() ? step.device_loss + value : value;
    }
  };
  // Forward of the stage for this micro-batch; on the last stage, the scaled loss.
  auto forward = [&](bool record) {
    double bytes = 0;
    torch::Tensor out = stage->forward(step.input[c], record ? &bytes : nullptr);
    if (last) {
      out = loss_(out, step.targets[mb]) * step.scales[mb];
      if (record) count_loss(out);
    }
    return std::make_pair(out, bytes);
  };

  switch (a.kind) {
    case ActionKind::REDUCE_GRAD:
      // The bucket index rides in the micro-batch slot. Without a dp group
      // (dp = 1) reducing is the identity; PyTorch's CSVs carry REDUCE_GRAD even so.
      if (options_.dp_group != nullptr) start_reduction(step, s, mb);
      return;
    case ActionKind::REDUCE_TIED: {
      // The group rides in the micro-batch slot; its sum runs at this rank's
      // last REDUCE_TIED of the group, and every member records its span (below).
      const auto found = tie_groups_.find(mb);
      if (found != tie_groups_.end() && found->second.last == index) reduce_tied(step, mb);
      break;
    }
    case ActionKind::F: {
      if (s == 0) {
        step.input[c] = step.inputs[mb];
      } else if (!step.input[c].defined()) {
        // The previous stage ran on this rank: take its output directly.
        const size_t prev = step.cell(s - 1, mb);
        step.input[c] = step.output[prev].detach().requires_grad_(step.output[prev].is_floating_point());
      }
      double bytes = 0;
      if (recomputed) {
        torch::NoGradGuard no_grad;
        step.output[c] = forward(false).first;
        if (last) count_loss(step.output[c]);
        bytes = static_cast<double>(step.input[c].numel() * step.input[c].element_size());
      } else {
        auto [out, recorded] = forward(true);
        step.output[c] = out;
        bytes = recorded;
      }
      step.activation_bytes[c] = bytes;
      step.result.stage_activation_bytes[s] += bytes / schedule_.microbatches;
      step.stashed_bytes += bytes;
      step.result.peak_activation_bytes = std::max(step.result.peak_activation_bytes, step.stashed_bytes);
      if (!last && placement_.rank_of(s + 1, mb) == rank_) {
        const size_t next = step.cell(s + 1, mb);
        step.input[next] = step.output[c].detach().requires_grad_(step.output[c].is_floating_point());
      }
      break;
    }
    case ActionKind::B:
    case ActionKind::I: {
      if (recomputed) step.output[c] = forward(false /* loss already counted */).first;
      const bool split = a.kind == ActionKind::I;
      if (split) stage->set_defer_weight_grad(true, mb);
      if (last) {
        torch::autograd::backward({step.output[c]});
      } else {
        torch::Tensor grad = step.grad_output[c];
        if (!grad.defined()) {
          // The next stage ran on this rank: its input gradient is ours.
          grad = step.grad_input[step.cell(s + 1, mb)];
          step.grad_input[step.cell(s + 1, mb)] = torch::Tensor();
        }
        BATON_ASSERT(grad.defined(), "no output gradient for ", describe(a, -1));
        torch::autograd::backward({step.output[c]}, {grad});
      }
      if (split) stage->set_defer_weight_grad(false, mb);
      if (s > 0 && step.input[c].requires_grad()) step.grad_input[c] = step.input[c].grad();
      step.input[c] = torch::Tensor();
      step.output[c] = torch::Tensor();
      step.grad_output[c] = torch::Tensor();
      step.stashed_bytes -= step.activation_bytes[c];
      break;
    }
    case ActionKind::W:
      stage->run_weight_backward(mb);
      break;
    case ActionKind::SEND_F: {
      const int to = peer(placement_.rank_of(s + 1, mb));
      const torch::Tensor payload = tp_scatter(step.output[c].detach(), a);
      step.result.stage_boundary_bytes[s] = static_cast<double>(payload.numel() * payload.element_size());
      step.sends.push_back(comm_->isend(payload, to, comm::Tag{s, mb, comm::Direction::kForward}));
      return;
    }
    case ActionKind::SEND_B: {
      const int to = peer(placement_.rank_of(s - 1, mb));
      BATON_ASSERT(step.grad_input[c].defined(), "no input gradient for ", describe(a, to));
      step.sends.push_back(comm_->isend(tp_scatter(step.grad_input[c], a), to,
                                        comm::Tag{s, mb, comm::Direction::kBackward}));
      step.grad_input[c] = torch::Tensor();
      return;
    }
    case ActionKind::RECV_F: {
      const int from = peer(placement_.rank_of(s - 1, mb));
      torch::Tensor x = tp_gather(on_device(step.recv_forward[c]->wait(describe(a, from))), a);
      step.recv_forward[c].reset();
      step.input[c] = x.is_floating_point() ? x.requires_grad_(true) : x;
      return;
    }
    case ActionKind::RECV_B: {
      const int from = peer(placement_.rank_of(s + 1, mb));
      step.grad_output[c] = tp_gather(on_device(step.recv_backward[c]->wait(describe(a, from))), a);
      step.recv_backward[c].reset();
      return;
    }
  }
  const auto ended = Clock::now();
  auto ms = [&](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - step.start).count();
  };
  step.result.events.push_back({rank_, s, mb, a.kind, ms(started), ms(ended)});
}

void Executor::build_tie_groups() {
  // Which tied weight (slot "tied/<i>") each named copy of this rank is, and
  // the stages holding copies of each tied weight.
  std::map<std::pair<int, std::string>, std::string> slot_of;
  std::vector<std::vector<int>> tied_stages;
  for (size_t i = 0; i < options_.tied.size(); ++i) {
    tied_stages.emplace_back();
    for (const auto& copy : options_.tied[i]) {
      slot_of[{copy.stage, copy.name}] = "tied/" + std::to_string(i);
      tied_stages.back().push_back(copy.stage);
    }
  }
  // A rank shares a stage's slots when it computes the stage (a replicated
  // stage) or, for a tied weight, any stage holding one of its copies.
  auto holds = [&](int rank, int stage, const std::string& slot) {
    auto computes = [&](int st) {
      const auto ranks = placement_.ranks_of_stage(st);
      return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
    };
    if (slot.rfind("tied/", 0) == 0) {
      for (int st : tied_stages[std::stoul(slot.substr(5))])
        if (computes(st)) return true;
      return false;
    }
    return computes(stage);
  };
  std::map<int, std::set<int>> ranks_of_group;  // every rank with a REDUCE_TIED of the group
  for (int r = 0; r < schedule_.ranks; ++r) {
    for (const Action& a : schedule_.actions[r])
      if (a.kind == ActionKind::REDUCE_TIED) ranks_of_group[a.microbatch].insert(r);
  }
  std::map<int, int> tied_here;  // stage -> its REDUCE_TIED group on this rank
  const auto& actions = schedule_.actions[rank_];
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (a.kind != ActionKind::REDUCE_TIED) continue;
    tied_here[a.stage] = a.microbatch;
    TieGroup& group = tie_groups_[a.microbatch];
    group.last = i;
    const bool replicated = placement_.ranks_of_stage(a.stage).size() > 1;
    for (const auto& item : stages_.at(a.stage)->module().named_parameters()) {
      const auto tied = slot_of.find({a.stage, item.key()});
      if (tied == slot_of.end() && !replicated) continue;
      const std::string slot = tied != slot_of.end() ? tied->second : item.key();
      group.copies[slot].push_back(item.value());
      for (int r : ranks_of_group[a.microbatch]) {
        if (r != rank_ && holds(r, a.stage, slot)) group.shared[r].push_back(slot);
      }
    }
  }
  for (auto& [g, group] : tie_groups_) {
    for (auto& [r, slots] : group.shared) {
      std::sort(slots.begin(), slots.end());
      slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
    }
  }
  // Copies without a REDUCE_TIED would step apart: refuse the schedule.
  for (const auto& [index, stage] : stages_) {
    bool copied = placement_.ranks_of_stage(index).size() > 1;
    for (const auto& [key, slot] : slot_of) copied |= key.first == index;
    BATON_CHECK(!copied || tied_here.count(index), "[runtime.executor] rank ", rank_, ": stage ",
                index, " holds parameters with copies elsewhere in the pipeline (a replicated stage or "
                "a tied weight) but schedule \"", schedule_.name, "\" has no REDUCE_TIED of it on this "
                "rank; add them with schedule::add_tied_reductions");
  }
}

void Executor::wait_reductions(Step& step) {
  if (step.reductions.empty()) return;
  const auto from = Clock::now();
  for (auto& reduction : step.reductions) reduction.wait();
  step.reductions.clear();
  step.result.reduction_wait_ms += std::chrono::duration<double, std::milli>(Clock::now() - from).count();
}

void Executor::reduce_tied(Step& step, int group_index) {
  // dp first: the copy sum then adds the replicas' means, which equals the
  // mean of the sums, and no all-reduce still writes these gradients.
  wait_reductions(step);
  TieGroup& group = tie_groups_.at(group_index);
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
  const comm::Tag tag{group_index, comm::kReservedMicrobatch, comm::Direction::kBackward};
  std::map<int, comm::RecvHandle> received;
  std::vector<comm::SendHandle> sends;
  for (const auto& [r, slots] : group.shared) {
    received.emplace(r, comm_->irecv(peer(r), tag));
    std::vector<torch::Tensor> flat;
    for (const auto& slot : slots) flat.push_back(partial.at(slot).reshape({-1}));
    sends.push_back(comm_->isend(torch::cat(flat), peer(r), tag));
  }
  // Every holder adds the parts in rank order, so every copy gets the same bits.
  std::map<std::string, torch::Tensor> total;
  auto add = [&](const std::string& slot, const torch::Tensor& part) {
    auto& t = total[slot];
    t = t.defined() ? t + part : part.clone();
  };
  const std::string what = "the tied gradient sum of group " + std::to_string(group_index);
  std::map<int, torch::Tensor> parts;
  for (auto& [r, handle] : received) parts[r] = on_device(handle.wait(what + " with rank " + std::to_string(r)));
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

std::map<int, torch::Tensor> Executor::run_forward(const torch::Tensor& inputs, int microbatches) {
  torch::NoGradGuard no_grad;
  if (versions_) versions_->use_latest();  // evaluate the masters' weights
  auto found = eval_schedules_.find(microbatches);
  if (found == eval_schedules_.end()) {
    found = eval_schedules_
                .emplace(microbatches, schedule::lower(schedule::forward_only(schedule_, microbatches)))
                .first;
  }
  const schedule::Schedule& eval = found->second;
  const schedule::Placement placement(eval);
  const int S = eval.stages;
  const std::vector<Action>& actions = eval.actions[rank_];
  std::vector<torch::Tensor> chunks;
  for (const Action& a : actions) {
    if (a.kind == ActionKind::F && a.stage == 0) {
      chunks = split_microbatches(on_device(inputs), microbatches);
      break;
    }
  }
  // (stage, micro-batch) -> the receive posted at the start, or the output made here.
  std::map<std::pair<int, int>, comm::RecvHandle> received;
  std::map<std::pair<int, int>, torch::Tensor> made;
  for (const Action& a : actions) {
    if (a.kind == ActionKind::RECV_F) {
      received.emplace(std::make_pair(a.stage, a.microbatch),
                       comm_->irecv(peer(placement.rank_of(a.stage - 1, a.microbatch)),
                                    comm::Tag{a.stage - 1, a.microbatch, comm::Direction::kForward}));
    }
  }
  std::map<int, torch::Tensor> outputs;
  std::vector<comm::SendHandle> sends;
  for (const Action& a : actions) {
    const int s = a.stage, mb = a.microbatch;
    switch (a.kind) {
      case ActionKind::RECV_F: {
        auto it = received.find({s, mb});
        made[{s - 1, mb}] = on_device(it->second.wait(describe(a, peer(placement.rank_of(s - 1, mb)))));
        received.erase(it);
        break;
      }
      case ActionKind::F: {
        torch::Tensor x;
        if (s == 0) {
          x = chunks[mb];
        } else {
          auto it = made.find({s - 1, mb});
          x = it->second;
          made.erase(it);
        }
        torch::Tensor out = stages_.at(s)->forward(x);
        if (s == S - 1) {
          outputs[mb] = out;
        } else {
          made[{s, mb}] = out;
        }
        break;
      }
      case ActionKind::SEND_F: {
        auto it = made.find({s, mb});
        sends.push_back(comm_->isend(it->second, peer(placement.rank_of(s + 1, mb)),
                                     comm::Tag{s, mb, comm::Direction::kForward}));
        made.erase(it);
        break;
      }
      default:
        BATON_ASSERT(false, "an evaluation schedule holds ", schedule::to_string(a));
    }
  }
  for (auto& send : sends) send.wait("an evaluation send");
  return outputs;
}

}  // namespace baton::runtime
