#include "baton/runtime/executor.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <torch/autograd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <set>

#include "baton/comm/memory_counter.h"
#include "baton/comm/tag.h"
#include "baton/comm/tensor_bundle.h"
#include "baton/core/error.h"
#include "baton/nn/recompute_region.h"
#include "baton/runtime/action_tag.h"
#include "baton/runtime/carries.h"
#include "baton/runtime/microbatch.h"
#include "baton/runtime/on_device.h"
#include "baton/runtime/step.h"

namespace baton::runtime {

using detail::Clock;
using schedule::Action;
using schedule::ActionKind;

Executor::Executor(schedule::Schedule schedule, comm::RankLayout layout,
                   std::vector<std::shared_ptr<Stage>> stages, LossFn loss, ExecutorOptions options)
    : schedule_(std::move(schedule)),
      placement_(schedule_),
      rank_(layout.pipeline_rank()),
      loss_(std::move(loss)),
      layout_(std::move(layout)),
      comm_(*layout_.world),
      options_(options) {
  BATON_CHECK(schedule_.ranks == layout_.grid.pp(), "[runtime.executor] schedule \"",
              schedule_.name, "\" has ", schedule_.ranks,
              " ranks but the pipeline has pp=", layout_.grid.pp());
  const int rank = rank_;
  for (auto& stage : stages) stages_[stage->index()] = std::move(stage);
  for (int s : placement_.stages_of_rank(rank)) {
    BATON_CHECK(stages_.count(s), "[runtime.executor] rank ", rank, " runs stage ", s,
                " in schedule \"", schedule_.name, "\" but was given no module for it");
  }
  const int skips = static_cast<int>(schedule_.skips.size());
  BATON_CHECK(schedule_.stages + skips <= comm::kMaxStages, "[runtime.executor] schedule \"",
              schedule_.name, "\" has ", schedule_.stages, " stages and ", skips,
              " skip connections; their messages' tags allow ", comm::kMaxStages, " in all");
  skips_into_.resize(schedule_.stages);
  skips_out_of_.resize(schedule_.stages);
  for (int k = 0; k < skips; ++k) {
    skips_out_of_[schedule_.skips[k].from].push_back(k);
    skips_into_[schedule_.skips[k].to].push_back(k);
  }
  loss_ranks_ = placement_.ranks_of_stage(schedule_.stages - 1);
  std::sort(loss_ranks_.begin(), loss_ranks_.end());
  const auto& actions = schedule_.actions[rank_];
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].kind == ActionKind::F && actions[i].stage == schedule_.stages - 1)
      last_loss_forward_ = i;
  }
  buckets_ =
      std::make_unique<BucketReducer>(schedule_, rank_, stages_, layout_.dp, options_.bucket_bytes);
  if (options_.zero > 0 && layout_.dp->world_size() > 1) {
    // A stage whose gradients REDUCE_TIED sums after their reduction keeps
    // them whole until then.
    std::set<int> tied_here;
    for (const Action& a : schedule_.actions[rank_])
      if (a.kind == ActionKind::REDUCE_TIED) tied_here.insert(a.stage);
    zero_ = std::make_unique<ZeroShards>(options_.zero, stages_, layout_.dp, tied_here);
  }
  tie_groups_ = std::make_unique<TiedReducer>(schedule_, placement_, layout_, stages_,
                                              options_.tied, options_.device);
  carries_ =
      std::make_unique<Carries>(schedule_, rank_, stages_, options_.recompute, options_.pipemare);
  clipper_ =
      std::make_unique<NormClipper>(placement_, layout_, stages_, options_.tied, zero_.get());
  BATON_CHECK(options_.precision != Precision::Fp16 || schedule_.has_clip_norm(),
              "[runtime.executor] fp16 needs a CLIP_NORM in schedule \"", schedule_.name,
              "\" (its norm finds an overflow on any rank and unscales the gradients)");
}

Executor::~Executor() = default;

bool Executor::carrying() const {
  return carries_->pending();
}

WeightVersions* Executor::versions() const {
  return carries_->versions();
}

void Executor::set_update(std::function<void(double lr_scale)> update) {
  if (versions()) versions()->set_update(std::move(update));
}

bool Executor::updates_per_microbatch() const {
  return versions() && versions()->updates() != WeightVersions::Updates::PerStep;
}

std::vector<torch::Tensor> Executor::parameters() const {
  if (versions()) return versions()->masters();
  std::vector<torch::Tensor> out;
  for (const auto& [index, stage] : stages_)
    for (auto& p : stage->parameters()) out.push_back(p);
  return out;
}

StepResult Executor::run_step(const torch::Tensor& inputs, const torch::Tensor& targets) {
  return run(inputs.defined() ? nn::Tensors{inputs} : nn::Tensors{}, targets,
             /*drain_only=*/false);
}

StepResult Executor::run_step(const nn::Tensors& inputs, const torch::Tensor& targets) {
  return run(inputs, targets, /*drain_only=*/false);
}

StepResult Executor::drain() {
  if (!carrying()) return {};
  return run(nn::Tensors{}, torch::Tensor(), /*drain_only=*/true);
}

MicrobatchCuts Executor::split(const nn::Tensors& inputs, int microbatches) const {
  nn::Tensors here;
  for (const auto& t : inputs) here.push_back(on_device(t));
  return MicrobatchCuts(std::move(here), microbatches, options_.whole_inputs);
}

StepResult Executor::run(const nn::Tensors& inputs, const torch::Tensor& targets, bool drain_only) {
  const int S = schedule_.stages, m = schedule_.microbatches;
  Step step(schedule_, placement_, drain_only);
  step.result.start_ms =
      std::chrono::duration<double, std::milli>(step.start.time_since_epoch()).count();
  // A schedule without a flush: the carried actions run on what the last
  // step left (none in a first step); a drain runs only them.
  carries_->restore(step);
  const auto& actions = schedule_.actions[rank_];
  bool needs_inputs = false, needs_targets = false;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (skipped(step, i)) continue;
    needs_inputs |= actions[i].kind == ActionKind::F && actions[i].stage == 0;
    needs_targets |= actions[i].kind == ActionKind::F && actions[i].stage == S - 1;
  }
  if (needs_inputs) step.inputs = split(inputs, m);
  if (needs_targets) {
    BATON_CHECK(targets.defined(), "[runtime.microbatch] the last stage's rank got no targets");
    BATON_CHECK(targets.dim() >= 1, "[runtime.microbatch] a batch needs a batch dimension (dim 0)");
    step.targets = MicrobatchCuts({on_device(targets)}, m);
    step.scales = loss_scales(step.targets);
  }
  if (options_.share_loss && !drain_only) {
    for (int r : loss_ranks_) {
      if (r != rank_) step.recv_loss.emplace(r, comm_.irecv(peer(r), comm::loss_tag(S)));
    }
  }
  // Under ZeRO a step's gradients start from none (runtime/zero.h).
  if (zero_ && !drain_only) zero_->clear_gradients();
  {
    // One autocast region for the whole step: each weight is cast once.
    AutocastScope autocast(options_.precision, options_.device);
    interpret(step);
  }
  if (drain_only) {
    step.result.minibatch_loss = std::numeric_limits<double>::quiet_NaN();
  } else {
    gather_loss(step);
  }
  if (!step.sends.empty()) {
    const std::string what = "a send of step " + std::to_string(steps_run_ + 1);
    for (auto& send : step.sends) send.wait(what);
  }
  wait_reductions(step);
  if (zero_) zero_->slice_gradients(/*deferred_too=*/true);
  measure_reductions(step.result);
  carries_->end_step(step);
  if (!drain_only) ++steps_run_;
  step.result.step_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - step.start).count();
  return std::move(step.result);
}

bool Executor::skipped(const Step& step, size_t index) const {
  return !step.forward_only && carries_->skipped(step, index);
}

namespace {

// F allocates what the backward keeps; B, I and W the gradients; the rest
// moves or reduces data.
comm::MemoryCategory memory_category(schedule::ActionKind kind) {
  using schedule::ActionKind;
  if (kind == ActionKind::F) return comm::MemoryCategory::kActivations;
  if (schedule::is_compute(kind)) return comm::MemoryCategory::kGradients;
  return comm::MemoryCategory::kBuffers;
}

}  // namespace

void Executor::interpret(Step& step) {
  const auto& actions = step.schedule.actions[rank_];
  // Post every receive now, so data can land while this rank computes.
  comm::MemoryCategoryScope receives(comm::MemoryCategory::kBuffers);
  for (size_t i = 0; i < actions.size(); ++i) {
    const Action& a = actions[i];
    if (skipped(step, i)) continue;
    if (a.kind != ActionKind::RECV_F && a.kind != ActionKind::RECV_B) continue;
    const bool forward = a.kind == ActionKind::RECV_F;
    if (a.skip >= 0) {
      auto& handles = forward ? step.recv_skip_forward : step.recv_skip_backward;
      handles[step.skip_cell(a.skip, a.microbatch)] = comm_.irecv(peer_of(step, a), tag_of(a));
      continue;
    }
    auto& handles = forward ? step.recv_forward : step.recv_backward;
    handles[step.cell(a.stage, a.microbatch)] = comm_.irecv(peer_of(step, a), tag_of(a));
  }
  const bool trains = !step.forward_only;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (skipped(step, i)) continue;
    if (trains) carries_->before(step, actions[i], i);
    // What an action allocates is charged to its category (memory_counter.h).
    comm::MemoryCategoryScope charged(memory_category(actions[i].kind));
    try {
      run_action(step, i);
    } catch (const c10::Error& e) {
      if (options_.precision == Precision::Fp32 || !schedule::is_compute(actions[i].kind)) throw;
      // A layer without a kernel for the compute dtype: one line, not a backtrace.
      const std::string what = e.what_without_backtrace();
      const auto stage = stages_.find(actions[i].stage);
      const std::string layer = stage == stages_.end() ? "" : stage->second->failed_layer();
      throw Error(baton::detail::concat(
          "[runtime] ", describe(actions[i], -1), layer.empty() ? "" : ", " + layer, " in ",
          to_string(options_.precision), " failed under LibTorch ", TORCH_VERSION, ": ",
          what.substr(0, what.find('\n')), " (an op of the stage has no ",
          to_string(options_.precision),
          " kernel for these inputs here; baton computes LayerNorm and the loss in fp32: do the "
          "same in that layer, or use fp32)"));
    }
    if (trains) carries_->after(step, actions[i]);
    if (trains && i == last_loss_forward_ && !step.drain_only) send_loss(step);
  }
}

void Executor::run_action(Step& step, size_t index) {
  const Action& a = step.schedule.actions[rank_][index];
  if (zero_ && schedule::is_compute(a.kind) && zero_->unsharding(a.stage)) {
    // The compute waits for its stage's all-gather: what the prefetch left exposed.
    const auto from = Clock::now();
    zero_->finish_unshard(a.stage);
    step.result.unshard_wait_ms +=
        std::chrono::duration<double, std::milli>(Clock::now() - from).count();
  }
  const auto started = Clock::now();
  switch (a.kind) {
    case ActionKind::SEND_F:
    case ActionKind::SEND_B:
      if (a.skip >= 0) {
        send_skip(step, a);
      } else {
        send(step, a);
      }
      return;
    case ActionKind::RECV_F:
    case ActionKind::RECV_B:
      if (a.skip >= 0) {
        receive_skip(step, a);
      } else {
        receive(step, a);
      }
      return;
    case ActionKind::REDUCE_GRAD:
      reduce_grad(step, a, started);
      return;
    case ActionKind::REDUCE_SCATTER:
      reduce_scatter(step, a, started);
      return;
    case ActionKind::UNSHARD:
      if (zero_) zero_->start_unshard(a.stage);
      break;
    case ActionKind::RESHARD:
      if (zero_) zero_->reshard(a.stage);
      break;
    case ActionKind::REDUCE_TIED:
      reduce_tied(step, a, index);
      break;
    case ActionKind::CLIP_NORM:
      clip_norm(step);
      break;
    case ActionKind::F:
      compute_forward(step, a);
      break;
    case ActionKind::B:
    case ActionKind::I:
      compute_backward(step, a);
      break;
    case ActionKind::W:
      stages_.at(a.stage)->run_weight_backward(a.microbatch);
      break;
  }
  // Compute actions, every REDUCE_TIED (where its group sums or not) and
  // CLIP_NORM record their span.
  step.result.events.push_back(
      {rank_, a.stage, a.microbatch, a.kind, step.ms_at(started), step.ms_at(Clock::now())});
}

bool recomputes(Recompute recompute, int microbatch, int microbatches) {
  return recompute == Recompute::Always ||
         (recompute == Recompute::ExceptLast && microbatch + 1 < microbatches);
}

bool Executor::recomputes(int microbatch) const {
  return runtime::recomputes(options_.recompute, microbatch, schedule_.microbatches);
}

void Executor::count_loss(Step& step, const torch::Tensor& loss) const {
  // At once on the CPU; on a device, summed there (no device-to-host sync per micro-batch).
  if (options_.device.is_cpu()) {
    step.result.loss += loss.item<double>();
  } else {
    torch::Tensor value = loss.detach().to(torch::kFloat64);
    step.device_loss = step.device_loss.defined() ? step.device_loss + value : value;
  }
}

nn::Tensors Executor::stage_forward(Step& step, const Action& a, double* activation_bytes) {
  const int mb = a.microbatch;
  nn::Tensors out;
  if (schedule_.skips.empty()) {
    out = stages_.at(a.stage)->forward(step.input[step.cell(a.stage, mb)], activation_bytes);
  } else {
    // The stage pops its skips' tensors from this frame and stashes into it.
    nn::SkipFrame frame;
    for (int k : skips_into_[a.stage]) {
      torch::Tensor& in = step.skip_in[step.skip_cell(k, mb)];
      if (!in.defined()) {
        // Stashed on this rank: take it directly (in training, a leaf).
        const torch::Tensor& stashed = step.skip_out[step.skip_cell(k, mb)];
        BATON_ASSERT(stashed.defined(), "skip ", k, " has no tensor for ", describe(a, -1));
        const bool leaf = !step.forward_only && stashed.is_floating_point();
        in = leaf ? stashed.detach().requires_grad_(true) : stashed;
        if (step.forward_only) step.skip_out[step.skip_cell(k, mb)] = torch::Tensor();
      }
      frame.values()[schedule_.skips[k].name] = in;
    }
    out = stages_.at(a.stage)->forward(step.input[step.cell(a.stage, mb)], activation_bytes);
    for (int k : skips_out_of_[a.stage]) {
      auto it = frame.values().find(schedule_.skips[k].name);
      BATON_CHECK(it != frame.values().end(), "[runtime] ", describe(a, -1), " stashed no \"",
                  schedule_.skips[k].name,
                  "\", which its layers declare (nn::SkipNames) and a later stage pops");
      step.skip_out[step.skip_cell(k, mb)] = it->second;
      frame.values().erase(it);
    }
    if (!frame.values().empty()) {
      BATON_CHECK(false, "[runtime] ", describe(a, -1), " left \"", frame.values().begin()->first,
                  "\" unpopped: a skip its layers do not declare, or one they declare but do "
                  "not pop (nn::SkipNames)");
    }
    if (step.forward_only) {
      for (int k : skips_into_[a.stage]) step.skip_in[step.skip_cell(k, mb)] = torch::Tensor();
    }
  }
  const bool mixed = options_.precision != Precision::Fp32;
  if (a.stage == step.stages - 1) {
    BATON_CHECK(out.size() == 1 && out.front().defined(), "[runtime] the last stage (stage ",
                a.stage, ") returns ", out.size(),
                " tensors, but the loss takes the model's one output: make the model's last "
                "layer return one torch::Tensor");
    torch::Tensor& y = out.front();
    // The loss (and the outputs handed back) in fp32.
    if (mixed && y.is_floating_point()) y = y.to(torch::kFloat);
    if (step.forward_only) return out;
    y = loss_(y, step.targets.at(mb).front()) * step.scales[mb];
    if (activation_bytes != nullptr) count_loss(step, y);
  } else if (mixed) {
    // The boundary in the compute dtype: half of fp32's bytes on the wire.
    for (auto& t : out) {
      if (t.defined() && t.is_floating_point()) t = t.to(compute_dtype(options_.precision));
    }
  }
  return out;
}

void Executor::compute_forward(Step& step, const Action& a) {
  const int s = a.stage, mb = a.microbatch;
  const size_t c = step.cell(s, mb);
  const bool last = s == step.stages - 1;
  // A stage's output as the next stage's input on this rank: in training, a
  // leaf of the next stage's graph.
  const auto handed = [&](const nn::Tensors& out) {
    if (step.forward_only) return out;
    nn::Tensors leaves;
    for (const auto& t : out) {
      leaves.push_back(t.defined() ? t.detach().requires_grad_(t.is_floating_point()) : t);
    }
    return leaves;
  };
  if (s == 0) {
    step.input[c] = step.inputs.at(mb);
  } else if (step.input[c].empty()) {
    // The previous stage ran on this rank: take its output directly.
    step.input[c] = handed(step.output[step.cell(s - 1, mb)]);
  }
  double bytes = 0;
  if (step.forward_only) {
    step.output[c] = stage_forward(step, a, nullptr);
    step.input[c].clear();
  } else if (recomputes(mb)) {
    torch::NoGradGuard no_grad;
    const CastCacheOff no_cache;  // the casts are cached by a forward with a graph
    step.output[c] = stage_forward(step, a, nullptr);
    if (last) count_loss(step, step.output[c].front());
    bytes = nn::bytes_of(step.input[c]);
  } else {
    // --recompute selective: the layers' marked regions keep their inputs only.
    const nn::SelectiveRecomputeScope selective(options_.recompute == Recompute::Selective);
    step.output[c] = stage_forward(step, a, &bytes);
  }
  if (!step.forward_only) {
    step.activation_bytes[c] = bytes;
    step.result.stage_activation_bytes[s] += bytes / step.microbatches;
    step.stashed_bytes += bytes;
    step.result.peak_activation_bytes =
        std::max(step.result.peak_activation_bytes, step.stashed_bytes);
  }
  if (!last && step.placement.rank_of(s + 1, mb) == rank_) {
    step.input[step.cell(s + 1, mb)] = handed(step.output[c]);
    if (step.forward_only) step.output[c].clear();
  }
}

void Executor::compute_backward(Step& step, const Action& a) {
  const int s = a.stage, mb = a.microbatch;
  const size_t c = step.cell(s, mb);
  Stage& stage = *stages_.at(s);
  if (recomputes(mb)) step.output[c] = stage_forward(step, a, nullptr);  // loss already counted
  const bool split = a.kind == ActionKind::I;
  if (split) stage.set_defer_weight_grad(true, mb);
  if (s == step.stages - 1) {
    // fp16: the loss scaled up, so small gradients survive the half precision.
    const bool scaled = options_.precision == Precision::Fp16;
    const torch::Tensor& loss = step.output[c].front();
    torch::autograd::backward({scaled ? loss * scaler_.scale() : loss});
  } else {
    nn::Tensors grads = std::move(step.grad_output[c]);
    if (grads.empty()) {
      // The next stage ran on this rank: its input gradients are ours.
      grads = std::move(step.grad_input[step.cell(s + 1, mb)]);
      step.grad_input[step.cell(s + 1, mb)].clear();
    }
    const nn::Tensors& outputs = step.output[c];
    BATON_CHECK(grads.size() == outputs.size(), "[runtime] ", describe(a, -1), ": stage ", s,
                " returned ", outputs.size(), " tensors but ", grads.size(),
                " gradients came back (a stage returns the same count every micro-batch)");
    // Only the tensors that need a gradient and got one (not positions or masks).
    std::vector<torch::Tensor> roots, seeds;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].defined() && outputs[i].requires_grad() && grads[i].defined()) {
        roots.push_back(outputs[i]);
        seeds.push_back(grads[i]);
      }
    }
    // The tensors this stage stashed, seeded with the gradients their pops sent back.
    for (int k : skips_out_of_[s]) {
      const size_t slot = step.skip_cell(k, mb);
      const torch::Tensor &stashed = step.skip_out[slot], &grad = step.skip_grad_out[slot];
      if (stashed.defined() && stashed.requires_grad() && grad.defined()) {
        roots.push_back(stashed);
        seeds.push_back(grad);
      }
    }
    if (!roots.empty()) torch::autograd::backward(roots, seeds);
  }
  for (int k : skips_out_of_[s]) {
    step.skip_out[step.skip_cell(k, mb)] = torch::Tensor();
    step.skip_grad_out[step.skip_cell(k, mb)] = torch::Tensor();
  }
  // The popped tensors' gradients: to the stashing stage, here or on its rank.
  for (int k : skips_into_[s]) {
    const size_t slot = step.skip_cell(k, mb);
    torch::Tensor& in = step.skip_in[slot];
    torch::Tensor grad = in.defined() && in.requires_grad() ? in.grad() : torch::Tensor();
    if (step.placement.rank_of(schedule_.skips[k].from, mb) == rank_) {
      step.skip_grad_out[slot] = grad;
    } else {
      step.skip_grad_in[slot] = grad;  // undefined (sent as such) when it gets none
    }
    in = torch::Tensor();
  }
  if (split) stage.set_defer_weight_grad(false, mb);
  if (s > 0) {
    nn::Tensors& to_send = step.grad_input[c];
    to_send.clear();
    for (const auto& x : step.input[c]) {
      to_send.push_back(x.defined() && x.requires_grad() ? x.grad() : torch::Tensor());
    }
  }
  step.input[c].clear();
  step.output[c].clear();
  step.grad_output[c].clear();
  step.stashed_bytes -= step.activation_bytes[c];
}

int Executor::peer_of(const Step& step, const Action& a) const {
  // SEND_F and RECV_B talk to the next stage, SEND_B and RECV_F to the previous.
  const bool next = a.kind == ActionKind::SEND_F || a.kind == ActionKind::RECV_B;
  if (a.skip >= 0) {  // a skip's stashing and popping stages
    const schedule::Skip& skip = schedule_.skips[a.skip];
    return peer(step.placement.rank_of(next ? skip.to : skip.from, a.microbatch));
  }
  return peer(step.placement.rank_of(next ? a.stage + 1 : a.stage - 1, a.microbatch));
}

comm::Tag Executor::tag_of(const Action& a) const {
  return a.skip >= 0 ? skip_tag(a, schedule_.stages) : tag_for(a);
}

void Executor::send_skip(Step& step, const Action& a) {
  const size_t slot = step.skip_cell(a.skip, a.microbatch);
  torch::Tensor payload;
  if (a.kind == ActionKind::SEND_F) {
    payload = step.skip_out[slot].detach();
    if (step.forward_only) step.skip_out[slot] = torch::Tensor();
  } else {
    payload = step.skip_grad_in[slot];
    step.skip_grad_in[slot] = torch::Tensor();
  }
  BATON_ASSERT(payload.defined() || a.kind == ActionKind::SEND_B, "no tensor for ",
               describe(a, peer_of(step, a)));
  torch::Tensor part = tp_scatter(payload, a);
  if (a.kind == ActionKind::SEND_F) step.result.skip_bytes[a.skip] = nn::bytes_of({part});
  step.sends.push_back(
      comm_.isend(comm::pack_tensors({std::move(part)}), peer_of(step, a), tag_of(a)));
}

nn::Tensors Executor::take_received(Step& step, const Action& a,
                                    std::optional<comm::RecvHandle>& handle) {
  const auto what = [&] { return describe(a, peer_of(step, a)); };
  const torch::Tensor message = on_device(handle->wait_described(what));
  nn::Tensors x =
      comm::is_bundle(message) ? comm::unpack_tensors(message, what()) : nn::Tensors{message};
  handle.reset();
  for (auto& t : x) t = tp_gather(t, a);
  // In training, a forward's floating-point inputs are leaves whose
  // gradients the matching SEND_B sends back.
  if (a.kind == ActionKind::RECV_F && !step.forward_only) {
    for (auto& t : x) {
      if (t.defined() && t.is_floating_point()) t.requires_grad_(true);
    }
  }
  return x;
}

void Executor::receive_skip(Step& step, const Action& a) {
  const size_t slot = step.skip_cell(a.skip, a.microbatch);
  const bool forward = a.kind == ActionKind::RECV_F;
  nn::Tensors x =
      take_received(step, a, (forward ? step.recv_skip_forward : step.recv_skip_backward)[slot]);
  BATON_CHECK(x.size() == 1 && (x.front().defined() || !forward), "[runtime] ",
              describe(a, peer_of(step, a)), ": expected one tensor");
  (forward ? step.skip_in : step.skip_grad_out)[slot] = std::move(x.front());
}

void Executor::send(Step& step, const Action& a) {
  const size_t c = step.cell(a.stage, a.microbatch);
  const int to = peer_of(step, a);
  nn::Tensors parts;
  if (a.kind == ActionKind::SEND_F) {
    for (const auto& t : step.output[c]) parts.push_back(tp_scatter(t.detach(), a));
    step.result.stage_boundary_bytes[a.stage] = nn::bytes_of(parts);
    if (step.forward_only) step.output[c].clear();  // no backward needs it
  } else {
    BATON_ASSERT(!step.grad_input[c].empty(), "no input gradient for ", describe(a, to));
    for (const auto& g : step.grad_input[c]) parts.push_back(tp_scatter(g, a));
    step.grad_input[c].clear();
  }
  // Every tensor of the boundary in one message (comm/tensor_bundle.h).
  step.sends.push_back(comm_.isend(comm::pack_tensors(parts), to, tag_of(a)));
}

void Executor::receive(Step& step, const Action& a) {
  const size_t c = step.cell(a.stage, a.microbatch);
  const bool forward = a.kind == ActionKind::RECV_F;
  nn::Tensors x = take_received(step, a, (forward ? step.recv_forward : step.recv_backward)[c]);
  (forward ? step.input : step.grad_output)[c] = std::move(x);
}

void Executor::reduce_grad(Step& step, const Action& a, Clock::time_point started) {
  // The bucket index rides in the micro-batch slot. Without a dp group
  // (dp = 1) reducing is the identity; PyTorch's CSVs carry REDUCE_GRAD even so.
  if (auto handle = buckets_->start(a.stage, a.microbatch)) {
    step.reductions.push_back(std::move(*handle));
    // Ends for now when the start returns; wait_reductions() moves the end
    // to the all-reduce's finish.
    step.reduction_events.push_back(step.result.events.size());
    step.result.events.push_back(
        {rank_, a.stage, a.microbatch, a.kind, step.ms_at(started), step.ms_at(Clock::now())});
  }
}

void Executor::reduce_scatter(Step& step, const Action& a, Clock::time_point started) {
  const std::vector<int> members = buckets_->members(a.stage, a.microbatch);
  // Without ZeRO's shards (dp = 1), where the dp group has no reduce-scatter,
  // or for a stage whose tied copies are summed after the reduction:
  // REDUCE_GRAD's all-reduce, sliced afterwards (runtime/zero.h).
  if (!zero_ || members.empty() || zero_->all_reduces(a.stage)) {
    reduce_grad(step, a, started);
    if (zero_) zero_->note_scattered(a.stage, members);
    return;
  }
  step.reductions.push_back(
      zero_->start_scatter(a.stage, members,
                           baton::detail::concat("stage ", a.stage, " gradient bucket ",
                                                 a.microbatch, " REDUCE_SCATTER")));
  step.reduction_events.push_back(step.result.events.size());
  step.result.events.push_back(
      {rank_, a.stage, a.microbatch, a.kind, step.ms_at(started), step.ms_at(Clock::now())});
}

void Executor::reduce_tied(Step& step, const Action& a, size_t index) {
  // The group rides in the micro-batch slot; its sum runs at this rank's
  // last REDUCE_TIED of the group.
  if (!tie_groups_->sums_at(a.microbatch, index)) return;
  // dp first: the copy sum then adds the replicas' means, which equals the
  // mean of the sums, and no all-reduce still writes these gradients.
  wait_reductions(step);
  tie_groups_->sum(a.microbatch);
}

void Executor::clip_norm(Step& step) {
  // After every REDUCE_GRAD's all-reduce (REDUCE_TIED has summed already).
  wait_reductions(step);
  if (zero_) zero_->slice_gradients(/*deferred_too=*/true);
  const bool scaled = options_.precision == Precision::Fp16;
  step.result.loss_scale = scaled ? scaler_.scale() : 1;
  step.result.grad_norm = clipper_->clip(
      options_.clip_grad_norm, baton::detail::concat("CLIP_NORM of step ", steps_run_ + 1),
      1 / step.result.loss_scale);
  step.result.skip_update = !std::isfinite(step.result.grad_norm);
  // Every rank saw the same norm, so every rank moves the scale alike.
  if (scaled) scaler_.update(!step.result.skip_update);
}

double Executor::clip_grad_norm(double max_norm) {
  return clipper_->clip(max_norm, "clip_grad_norm");
}

void Executor::wait_reductions(Step& step) {
  if (step.reductions.empty()) return;
  const std::vector<comm::ReduceHandle> handles = step.reductions;  // wait_all clears them
  step.result.reduction_wait_ms += wait_all(step.reductions);
  // REDUCE_SCATTER's all-reduces are done: keep the shards (tied stages wait for their sum).
  if (zero_) zero_->slice_gradients(/*deferred_too=*/false);
  for (size_t k = 0; k < handles.size(); ++k) {
    trace::Event& event = step.result.events[step.reduction_events[k]];
    event.end = std::max(event.end, step.ms_at(handles[k].finished_at()));
  }
  step.reduction_events.clear();
}

void Executor::measure_reductions(StepResult& result) const {
  const trace::Reductions reductions = trace::reductions_of_rank(result.events, rank_);
  result.reduction_ms = reductions.total;
  result.exposed_reduction_ms = reductions.exposed;
}

void Executor::send_loss(Step& step) {
  // On a device the micro-batch losses so far are read back now, once.
  if (step.device_loss.defined()) {
    step.result.loss += step.device_loss.item<double>();
    step.device_loss = torch::Tensor();
  }
  if (!options_.share_loss) return;
  const torch::Tensor part = torch::tensor({step.result.loss}, torch::kFloat64);
  for (int r = 0; r < schedule_.ranks; ++r) {
    if (r != rank_)
      step.sends.push_back(comm_.isend(part, peer(r), comm::loss_tag(schedule_.stages)));
  }
}

void Executor::gather_loss(Step& step) {
  if (!options_.share_loss) {
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

torch::Tensor Executor::on_device(const torch::Tensor& tensor) const {
  return runtime::on_device(tensor, options_.device);
}

std::string Executor::describe(const Action& action, int peer) const {
  std::string text = "stage " + std::to_string(action.stage) + " micro-batch " +
                     std::to_string(action.microbatch) + " " +
                     std::string(schedule::to_string(action.kind));
  if (action.skip >= 0 && static_cast<size_t>(action.skip) < schedule_.skips.size())
    text += " of skip \"" + schedule_.skips[action.skip].name + "\"";
  if (peer >= 0) {
    const bool sends = action.kind == ActionKind::SEND_F || action.kind == ActionKind::SEND_B;
    text += (sends ? " to rank " : " from rank ") + std::to_string(peer);
  }
  return text;
}

torch::Tensor Executor::tp_scatter(const torch::Tensor& whole, const Action& action) const {
  const int t = layout_.tp->world_size(), k = layout_.tp->rank();
  // Only floating-point tensors are cut (positions and masks cross whole).
  if (t == 1 || !options_.scatter_gather || !whole.defined() || !whole.is_floating_point())
    return whole;
  BATON_CHECK(whole.dim() >= 1 && whole.size(-1) % t == 0,
              "[runtime.executor] scatter/gather over tp=", t,
              " needs boundary tensors whose last dimension tp divides; ", describe(action, -1),
              " sends ", whole.sizes(), " (turn scatter/gather off)");
  const int64_t d = whole.size(-1) / t;
  return whole.narrow(-1, k * d, d).contiguous();
}

torch::Tensor Executor::tp_gather(const torch::Tensor& slice, const Action& action) const {
  const int t = layout_.tp->world_size(), k = layout_.tp->rank();
  if (t == 1 || !options_.scatter_gather || !slice.defined() || !slice.is_floating_point())
    return slice;
  std::vector<int64_t> shape = slice.sizes().vec();
  const int64_t d = shape.back();
  shape.back() *= t;
  // Each rank fills its slice and zeros: the sum is the whole, exactly.
  std::vector<torch::Tensor> whole{torch::zeros(shape, slice.options())};
  whole[0].narrow(-1, k * d, d).copy_(slice);
  layout_.tp->all_reduce_sum(whole, "the tensor-parallel gather of " + describe(action, -1));
  return whole[0];
}

}  // namespace baton::runtime
