#include "baton/sim/memory_model.h"

#include <algorithm>
#include <map>
#include <set>

#include "baton/core/error.h"

namespace baton::sim {

StageMemory stage_memory(const ModelMemory& model, int first, int end, bool last) {
  BATON_CHECK(0 <= first && first < end && end <= static_cast<int>(model.layers.size()),
              "[sim.memory] layers ", first, "..", end - 1, " but the model has ",
              model.layers.size());
  StageMemory s;
  const auto wire = [](const LayerMemory& l) {
    return l.output_wire_bytes > 0 ? l.output_wire_bytes : l.output_bytes;
  };
  // A later stage's first layer runs on its input as the boundary delivers it.
  const auto layer = [&](int i) -> const LayerMemory& {
    const bool received =
        i == first && first > 0 && first < static_cast<int>(model.stage_inputs.size());
    return received ? model.stage_inputs[i] : model.layers[i];
  };
  const LayerMemory& in = layer(first);
  const LayerMemory& out = layer(end - 1);
  // A later stage's input arrives as the stage before handed it on.
  s.input_bytes = first > 0 ? wire(model.layers[first - 1]) : in.input_bytes;
  s.output_bytes = last ? 0 : wire(out);
  if (first > 0) {
    s.input_message = model.layers[first - 1].output_message_bytes;
    s.input_gradient_message = model.layers[first - 1].output_gradient_message_bytes;
  }
  if (!last) {
    s.output_message = out.output_message_bytes;
    s.output_gradient_message = out.output_gradient_message_bytes;
  }
  double peak_forward = 0;
  // The running stash before each layer's graph joins it.
  std::vector<double> before;
  for (int i = first; i < end; ++i) {
    const LayerMemory& l = layer(i);
    // The forward's temporaries come on top of what the layers before kept.
    peak_forward = std::max(peak_forward, s.stash + l.output_bytes + l.forward_extra);
    before.push_back(s.stash);
    s.stash += l.graph_bytes;
    // A boundary inside the stage saved by both layers is one tensor (one
    // saved by neither is freed once the next layer has run).
    if (i + 1 < end && l.keeps_output && layer(i + 1).keeps_input) s.stash -= l.output_bytes;
    s.weight_stash += l.weight_stash_bytes;
    s.weight_casts += l.weight_cast_bytes;
  }
  // The input is held outside the stash (a received buffer, the data, the
  // previous stage's output).
  const double outside = in.keeps_input ? in.input_bytes : 0;
  s.stash -= outside;
  // What the stash holds besides its layers' graphs, all through the B.
  double held_output = 0;
  if (last) {
    // The loss's graph; the last layer's output lives on only if one of them saved it.
    s.stash += model.loss.graph_bytes;
    if (out.keeps_output && model.loss.keeps_input) s.stash -= out.output_bytes;
    peak_forward = std::max(peak_forward, s.stash + model.loss.forward_extra);
  } else if (wire(out) != out.output_bytes) {
    held_output = wire(out);  // the executor holds the cast output until the B
  } else if (!out.keeps_output) {
    held_output = out.output_bytes;  // the executor holds the output until the B
  }
  s.stash += held_output;
  // The B's peak, layer by layer from the last. The loss's backward (the
  // last stage), or the stage's last layer's on the gradient it received
  // (held all through the B, by the walk), runs on the whole stash.
  // A split backward's I is walked the same way on its layers' I figures;
  // the layers after the one in flight have left their W stashes. On a
  // stage that sends its output, the last layer's W may keep the gradient
  // received for it, a tensor the walk holds already.
  const LayerMemory& head = last ? model.loss : out;
  s.backward_extra = head.backward_extra;
  s.input_backward_extra = head.input_backward_extra.value_or(head.backward_extra);
  s.backward_freed = 0;
  s.input_backward_freed = 0;
  s.weight_stash_output_gradient = last ? 0 : out.weight_stash_output_gradient_bytes;
  s.weight_stash -= s.weight_stash_output_gradient;
  double stashed_after = s.weight_stash;  // the W stashes of the layers after layer i
  const int inside_end = last ? end : end - 1;
  // The cast gradients of the layers after layer i, held in a late B.
  double cast_after = 0;
  for (int i = first; i < end; ++i) cast_after += layer(i).cast_gradient_bytes;
  s.cast_gradients = cast_after;
  // A late B's end: every graph freed, every cast gradient held, and the
  // input's gradient made.
  const double end_freed = held_output - s.stash;
  const double end_rise = end_freed + cast_after + (first > 0 ? s.input_bytes : 0);
  s.late_backward_extra = s.backward_extra;
  s.late_input_backward_extra = s.input_backward_extra;
  if (cast_after > 0 && end_rise > s.late_backward_extra) {
    s.late_backward_freed = s.late_input_backward_freed = end_freed;
    s.late_backward_extra = s.late_input_backward_extra = end_rise - end_freed;
  }
  for (int i = first; i < inside_end; ++i) {
    // Layer i's backward: the layers before it keep their graphs (a
    // boundary both saved once: its share is in layer i's figure), layer i
    // holds its backward_peak_bytes (its graph with the input it saved, held
    // outside when it is the stage's input), and the layers after it have
    // freed theirs, and on the last stage the loss its own.
    const LayerMemory& l = layer(i);
    const int k = i - first;
    stashed_after -= l.weight_stash_bytes;
    cast_after -= l.cast_gradient_bytes;
    const double freed = before[k] + l.graph_bytes - outside + held_output - s.stash;
    const double rise = before[k] + l.backward_peak_bytes - outside + held_output - s.stash;
    if (rise > s.backward_extra + s.backward_freed) {
      s.backward_freed = freed;
      s.backward_extra = rise - freed;  // its temporaries and gradients
    }
    const double input_rise = before[k] +
                              l.input_backward_peak_bytes.value_or(l.backward_peak_bytes) +
                              stashed_after - outside + held_output - s.stash;
    if (input_rise > s.input_backward_extra + s.input_backward_freed) {
      s.input_backward_freed = freed;
      s.input_backward_extra = input_rise - freed;  // with the later layers' W stashes
    }
    if (rise + cast_after > s.late_backward_extra + s.late_backward_freed) {
      s.late_backward_freed = freed;
      s.late_backward_extra = rise + cast_after - freed;
    }
    if (input_rise + cast_after > s.late_input_backward_extra + s.late_input_backward_freed) {
      s.late_input_backward_freed = freed;
      s.late_input_backward_extra = input_rise + cast_after - freed;
    }
  }
  s.forward_extra = std::max(0.0, peak_forward - s.stash);
  return s;
}

std::vector<double> layer_kept_bytes(const ModelMemory& model) {
  const int n = static_cast<int>(model.layers.size());
  std::vector<double> kept;
  double before = 0;
  for (int i = 0; i < n; ++i) {
    const double stash = stage_memory(model, 0, i + 1, /*last=*/i + 1 == n).stash;
    kept.push_back(std::max(0.0, stash - before));
    before = stash;
  }
  return kept;
}

namespace {

using schedule::Action;
using schedule::ActionKind;

class Walk {
 public:
  Walk(const std::vector<StageMemory>& stages, const StaticMemory& fixed)
      : stages_(stages), fixed_(fixed) {
    held_.parameters = fixed.parameters;
    held_.gradients = fixed.gradients_freed ? 0 : fixed.gradients;
    held_.optimizer = fixed.optimizer;
    held_.other = fixed.other;
  }

  const StageMemory& stage(int s) const {
    BATON_CHECK(s >= 0 && s < static_cast<int>(stages_.size()), "[sim.memory] stage ", s,
                " has no memory figures");
    return stages_[s];
  }

  double message_bytes(const Action& a) const {
    const StageMemory& s = stage(a.stage);
    if (a.kind == ActionKind::RECV_F) return s.input_message > 0 ? s.input_message : s.input_bytes;
    return s.output_gradient_message > 0 ? s.output_gradient_message : s.output_bytes;
  }

  bool on_arrival(const Action& a) const {
    return message_bytes(a) <= fixed_.receives_on_arrival_up_to;
  }

  // Receives are posted at the step's start: their buffers exist from then
  // until the step ends (their handles hold them).
  void post(const Action& a) {
    if (on_arrival(a)) return;
    held_.buffers += message_bytes(a);
    posted_ += message_bytes(a);
  }

  // A micro-batch of the previous step whose backward this step runs (a
  // schedule without a flush): its F kept its stash from then.
  void carry_in(const Action& a, bool recomputed) {
    const StageMemory& s = stage(a.stage);
    const std::pair<int, int> cell{a.stage, a.microbatch};
    if (stash_.count(cell) > 0) return;
    const double kept = recomputed ? s.output_bytes : s.stash;
    held_.activations += kept;
    stash_[cell] = kept;
  }

  // Weight versions (runtime/weight_versions.h): their gradient buffers
  // live from step to step, never freed by zero_grad. Under PipeDream-2BW
  // (`per_step`) a rank holds beside each weight and its gradient two more
  // gradient buffers (the current and the previous step's; the masters' own,
  // freed between steps where zero_grad sets it to none, comes back at the
  // step's end for the optimizer), and where it carries backwards (`carries`)
  // a second weight version all through: the previous step's, which they
  // read, kept after them for the next step's copy.
  void hold_versions(bool per_step, bool carries) {
    persistent_gradients_ = true;
    if (!per_step) {
      held_.gradients = fixed_.gradients;
      return;
    }
    per_step_ = true;
    if (carries) held_.parameters += fixed_.parameters;
    held_.gradients = (fixed_.gradients_freed ? 2 : 3) * fixed_.gradients;
  }

  // A message held from its arrival (StaticMemory::receives_on_arrival_up_to)
  // until its micro-batch's B or I.
  void receive(const Action& a) {
    if (!on_arrival(a)) return;
    held_.buffers += message_bytes(a);
    auto& arrived = a.kind == ActionKind::RECV_B ? arrived_gradient_ : arrived_;
    arrived[{a.stage, a.microbatch}] += message_bytes(a);
  }

  void forward(const Action& a, bool recomputed) {
    const StageMemory& s = stage(a.stage);
    // The stage's first F of the step with a graph casts its weights
    // (cached to the step's end); a recomputed F's casts are its own, and
    // its B's F caches them (runtime::CastCacheOff).
    if (!recomputed) cast(a);
    const double kept = recomputed ? s.output_bytes : s.stash;
    MemoryPrediction extra;
    extra.activations = kept + s.forward_extra;
    consider(extra);
    held_.activations += kept;
    stash_[{a.stage, a.microbatch}] = kept;
  }

  // The stage's weight casts, made by `a`'s F when none are cached yet.
  void cast(const Action& a) {
    if (!cast_.insert(a.stage).second) return;
    held_.activations += stage(a.stage).weight_casts;
    cast_by_[a.stage] = a.microbatch;
  }

  // A B, or a split backward's I or W (`split`: the schedule splits them).
  void backward(const Action& a, bool recomputed, bool split) {
    const StageMemory& s = stage(a.stage);
    const std::pair<int, int> cell{a.stage, a.microbatch};
    // Gradients freed between steps come back whole at the rank's first B
    // (its stages' first B's, at most a few actions apart).
    if (fixed_.gradients_freed && !gradients_back_ && !persistent_gradients_) {
      held_.gradients += fixed_.gradients;
      gradients_back_ = true;
    }
    const bool input_part = a.kind != ActionKind::W;  // B or I
    const bool until_w = split && input_part;         // an I, its W to come
    if (input_part) {
      // A recomputed micro-batch runs its F again first: its stash exists
      // for the B, which frees the later layers' graphs as it goes.
      if (recomputed) cast(a);  // its F again, with a graph
      // Unless its own F made the stage's casts, the cast gradients wait
      // for the B's end (LayerMemory::cast_gradient_bytes).
      const auto caster = cast_by_.find(a.stage);
      const bool late =
          s.cast_gradients > 0 && (caster == cast_by_.end() || caster->second != a.microbatch);
      MemoryPrediction extra;
      extra.activations = (recomputed ? s.stash - s.output_bytes : 0) +
                          (until_w ? (late ? s.late_input_backward_freed : s.input_backward_freed)
                                   : (late ? s.late_backward_freed : s.backward_freed));
      extra.gradients = until_w ? (late ? s.late_input_backward_extra : s.input_backward_extra)
                                : (late ? s.late_backward_extra : s.backward_extra);
      consider(extra);
      // Its received input and output gradient, held since they arrived, are
      // used up; the output gradient lives on to the W where the W keeps it.
      const bool w_keeps = until_w && s.weight_stash_output_gradient > 0;
      auto arrived = arrived_.find(cell);
      if (arrived != arrived_.end()) {
        held_.buffers -= arrived->second;
        arrived_.erase(arrived);
      }
      arrived = arrived_gradient_.find(cell);
      if (arrived != arrived_gradient_.end()) {
        if (w_keeps) {
          until_w_[cell].buffers += arrived->second;
        } else {
          held_.buffers -= arrived->second;
        }
        arrived_gradient_.erase(arrived);
      }
      // The gradient it took from the next stage on this rank is freed.
      auto taken = handed_.find({a.stage + 1, a.microbatch});
      if (taken != handed_.end()) {
        if (w_keeps) {
          until_w_[cell].gradients += taken->second;
        } else {
          held_.gradients -= taken->second;
        }
        handed_.erase(taken);
      }
      // Its input's gradient: sent (held by its send until the step ends)
      // or handed to the stage before on this rank.
      if (a.stage > 0) {
        held_.gradients += s.input_bytes;
        handed_[cell] = s.input_bytes;
      }
    }
    if (!input_part) {
      // The output gradient its W kept (above) goes with it.
      auto kept_for_w = until_w_.find(cell);
      if (kept_for_w != until_w_.end()) {
        held_.buffers -= kept_for_w->second.buffers;
        held_.gradients -= kept_for_w->second.gradients;
        until_w_.erase(kept_for_w);
      }
    }
    auto kept = stash_.find(cell);
    if (kept == stash_.end()) return;
    // A sent output stays held by its send until the step ends; an I keeps
    // what its W needs: inputs from the stash and the output gradients it
    // made, which can be more than the stash (the last stage's W keeps the
    // logits' gradient from the loss: gpt zb-h1 p = 4 rank 3 read 0.899
    // with the W's share capped at the stash).
    const double sent = sent_.count(cell) > 0 ? std::min(kept->second, s.output_bytes) : 0;
    const double stays = until_w ? s.weight_stash + sent : sent;
    held_.activations -= kept->second - stays;
    if (until_w) {
      kept->second = stays;
    } else {
      stash_.erase(kept);
    }
  }

  // A message the transport copies out at once is not held by its send;
  // any other is, until the step ends. A bundle is a copy of its tensors
  // (a buffer): the tensors go on as without a send (an output until its B,
  // an input gradient not at all), and the copy is held instead.
  void send(const Action& a) {
    const StageMemory& s = stage(a.stage);
    const bool forward = a.kind == ActionKind::SEND_F;
    const double bundle = forward ? s.output_message : s.input_gradient_message;
    if (!forward) handed_.erase({a.stage, a.microbatch});
    if (bundle > 0) {
      MemoryPrediction copy;  // beside its tensors while it is packed
      copy.buffers = bundle;
      consider(copy);
      if (!forward) held_.gradients -= s.input_bytes;
      if (bundle > fixed_.sends_copied_up_to) held_.buffers += bundle;
      return;
    }
    if (forward && s.output_bytes > fixed_.sends_copied_up_to)
      sent_.insert({a.stage, a.microbatch});
    if (!forward && s.input_bytes <= fixed_.sends_copied_up_to) held_.gradients -= s.input_bytes;
  }

  // The step's end: under ZeRO the gradient shards are cut beside the whole
  // gradients. Then the optimizer steps with its temporaries, after the
  // step has released its messages and stashes: the weights, the gradients
  // it steps (the shards where they were cut, which frees the whole), its
  // state and what lives outside the step. Without a flush, the stashes of
  // the micro-batches whose backwards the next step runs stay, and under
  // 2BW the weights they read stay too, beside the master that steps
  // (held all along, hold_versions).
  void optimizer_step(double extra) {
    MemoryPrediction slice;
    slice.gradients = fixed_.gradient_shards;
    consider(slice);
    const MemoryPrediction held = held_;
    held_ = MemoryPrediction{};
    for (const auto& [cell, kept] : stash_) held_.activations += kept;
    held_.parameters = held.parameters;
    held_.gradients = per_step_                    ? 3 * fixed_.gradients
                      : fixed_.gradient_shards > 0 ? fixed_.gradient_shards
                                                   : fixed_.gradients;
    held_.optimizer = held.optimizer;
    held_.other = held.other;
    // A posted receive's buffer is the transport's, kept for the next step's
    // message of its (peer, tag) (comm/buffer_cache.h): still held here
    // (cnn v-min rank 1 peaks at the step, 1.61 MB of them).
    held_.buffers = posted_;
    MemoryPrediction temporaries;
    temporaries.optimizer = extra;
    consider(temporaries);
    held_ = held;
  }

  MemoryPrediction peak() const { return peak_; }

  // The most held since the last call (what is held now, or more during the
  // actions walked since), and starts again from what is held now.
  double most_since_last() {
    const double most = std::max(most_, total(held_));
    most_ = total(held_);
    return most;
  }

 private:
  // What is held now plus `extra`: a new peak?
  void consider(const MemoryPrediction& extra) {
    MemoryPrediction now = held_;
    now.parameters += extra.parameters;
    now.gradients += extra.gradients;
    now.optimizer += extra.optimizer;
    now.activations += extra.activations;
    now.buffers += extra.buffers;
    now.other += extra.other;
    now.peak = total(now);
    most_ = std::max(most_, now.peak);
    if (now.peak > peak_.peak) peak_ = now;
  }

  static double total(const MemoryPrediction& m) {
    return m.parameters + m.gradients + m.optimizer + m.activations + m.buffers + m.other;
  }

  const std::vector<StageMemory>& stages_;
  StaticMemory fixed_;
  MemoryPrediction held_, peak_;
  std::map<std::pair<int, int>, double> stash_, handed_, arrived_, arrived_gradient_;
  // What a split backward's I leaves held for its W besides its stash: the
  // output's gradient, received (buffers) or handed on (gradients).
  struct KeptForW {
    double buffers = 0, gradients = 0;
  };
  std::map<std::pair<int, int>, KeptForW> until_w_;
  std::set<std::pair<int, int>> sent_;
  std::set<int> cast_;          // stages whose weights are cast this step
  std::map<int, int> cast_by_;  // the micro-batch whose F (with a graph) made a stage's casts
  double posted_ = 0;           // the receive buffers posted at the step's start
  bool gradients_back_ = false;
  bool persistent_gradients_ = false, per_step_ = false;
  double most_ = 0;  // the most held since most_since_last()
};

}  // namespace

StaticMemory replica_static(double whole, double stepped, int zero, int dp,
                            double optimizer_state_per_parameter_byte) {
  StaticMemory fixed;
  const bool sharded = zero > 0 && dp > 1;
  fixed.parameters = whole + (sharded && zero == 3 ? stepped : 0);
  fixed.gradients = whole;
  fixed.optimizer = optimizer_state_per_parameter_byte * stepped;
  if (sharded) fixed.gradient_shards = stepped;
  return fixed;
}

MemoryPrediction predict_rank_memory(const schedule::Schedule& schedule, int rank,
                                     const std::vector<StageMemory>& stages,
                                     const StaticMemory& fixed, const std::vector<bool>& recomputed,
                                     double optimizer_extra, MemoryTrace* trace) {
  BATON_CHECK(rank >= 0 && rank < schedule.ranks, "[sim.memory] rank ", rank,
              " is not in a schedule of ", schedule.ranks);
  const auto& actions = schedule.actions[rank];
  Walk walk(stages, fixed);
  const bool split = schedule.splits_backward();
  auto again = [&](int mb) {
    return mb >= 0 && mb < static_cast<int>(recomputed.size()) && recomputed[mb];
  };
  for (const Action& a : actions) {
    if ((a.kind == ActionKind::RECV_F || a.kind == ActionKind::RECV_B) && a.skip < 0) walk.post(a);
  }
  // Without a flush a backward listed before its F is the previous step's
  // micro-batch's (Schedule::carries): its stash is held from the start, and
  // the weight versions all through (hold_versions).
  std::set<std::pair<int, int>> forwarded;
  bool carried = false;
  for (int i = 0; schedule.carries && i < static_cast<int>(actions.size()); ++i) {
    const Action& a = actions[i];
    const bool backward =
        a.kind == ActionKind::B || a.kind == ActionKind::I || a.kind == ActionKind::W;
    if (a.kind == ActionKind::F) forwarded.insert({a.stage, a.microbatch});
    if (!backward || forwarded.count({a.stage, a.microbatch}) > 0) continue;
    walk.carry_in(a, again(a.microbatch));
    carried = true;
  }
  if (schedule.carries)
    walk.hold_versions(schedule.updates == schedule::WeightUpdates::kPerStep, carried);
  walk.most_since_last();  // the trace's first action starts from what is held now
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const Action& a = actions[i];
    switch (a.kind) {
      case ActionKind::F:
        walk.forward(a, again(a.microbatch));
        break;
      case ActionKind::B:
        walk.backward(a, again(a.microbatch), /*split=*/false);
        break;
      case ActionKind::I:
        walk.backward(a, again(a.microbatch), split);
        break;
      case ActionKind::W:
        walk.backward(a, false, /*split=*/true);
        break;
      case ActionKind::SEND_F:
      case ActionKind::SEND_B:
        if (a.skip < 0) walk.send(a);
        break;
      case ActionKind::RECV_F:
      case ActionKind::RECV_B:
        if (a.skip < 0) walk.receive(a);
        break;
      default:
        break;
    }
    if (trace) trace->during.push_back(walk.most_since_last());
  }
  walk.optimizer_step(optimizer_extra);
  if (trace) trace->optimizer_step = walk.most_since_last();
  return walk.peak();
}

}  // namespace baton::sim
