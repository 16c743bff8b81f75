// A Schedule is one ordered list of actions per rank: the whole training step
// of a pipeline. Generators produce compute-only schedules (F, B, I, W);
// lower() inserts the SEND/RECV pairs; validate() proves the result complete
// and deadlock-free. The simulator and the runtime both execute it.
#pragma once

#include <string>
#include <vector>

#include "baton/schedule/action.h"

namespace baton::schedule {

// How stages are laid out on ranks. The layout a schedule really uses is the
// one its actions show (see Placement); this names it for people and files.
enum class StageMap {
  Loop,           // stage s on rank s % p (v = stages / p chunks per rank)
  V,              // 2p stages: s on rank s for s < p, else on rank 2p - 1 - s
  Bidirectional,  // p stages on every rank, twice: micro-batches of the "down"
                  // pipeline run stage s on rank s, the "up" ones on p - 1 - s
  Custom,         // anything else a file describes
};

std::string_view to_string(StageMap map);
// "loop", "v", "bidirectional" (or "chimera"), "custom"; throws on anything else.
StageMap parse_stage_map(std::string_view text);

// A skip connection across stages (torchgpipe's stash/pop): stage `from`
// stashes a tensor under `name` that stage `to` pops, both in every
// micro-batch. The tensor goes straight from the rank of `from` to the rank of
// `to` (SEND_F/RECV_F with Action::skip), not through the stages between, and
// its gradient comes back the same way (SEND_B/RECV_B). A skip inside one
// stage never appears here.
struct Skip {
  std::string name;
  int from = 0;
  int to = 0;  // from < to
  friend bool operator==(const Skip& a, const Skip& b) {
    return a.name == b.name && a.from == b.from && a.to == b.to;
  }
};

// How a schedule without a flush updates the weights
// (runtime/weight_versions.h): after every step with a second buffer (2bw,
// and every synchronous schedule), after each backward with a stashed
// version per micro-batch (pipedream) or none (async), or as async with
// PipeMare's techniques (pipemare).
enum class WeightUpdates { kPerStep, kPerMicrobatch, kPerMicrobatchUnstashed, kPipeMare };

struct Schedule {
  std::string name;      // generator name ("1f1b") or "file"
  int ranks = 0;         // p: pipeline ranks, one action list each
  int stages = 0;        // total stages (p * v, or p for bidirectional)
  int microbatches = 0;  // m
  StageMap map = StageMap::Loop;
  std::vector<std::vector<Action>> actions;  // actions[rank], in execution order
  // Evaluation: every (stage, micro-batch) has one F and no backward
  // (validate() holds it to that); see forward_only() in generator.h.
  bool forward_only = false;
  // No flush between steps (PipeDream-2BW): the list is one step of a
  // pipeline that runs on from step to step. A backward-side action (B, I, W,
  // RECV_B, SEND_B) listed on a rank before that rank's F of the same (stage,
  // micro-batch) is "carried": it belongs to micro-batch m of the PREVIOUS
  // step, whose forward ran there. The first step runs no carried actions; a
  // drain (the carried actions alone) ends the last. validate() and the
  // simulator unroll such a window over several steps (schedule/unroll.h).
  bool carries = false;
  // Set with the name from the registry (generator.h's updates_of), so that
  // nothing past schedule/ compares a schedule's name.
  WeightUpdates updates = WeightUpdates::kPerStep;
  // The skip connections across stages; lower() adds their transfers.
  std::vector<Skip> skips;

  // v: stage chunks a rank holds (2 for V and bidirectional).
  int stages_per_rank() const;
  bool has_communication() const;    // any SEND/RECV
  bool has_grad_reductions() const;  // any REDUCE_GRAD or REDUCE_SCATTER
  bool has_sharding() const;         // any UNSHARD or RESHARD (ZeRO)
  bool has_tied_reductions() const;  // any REDUCE_TIED
  bool has_clip_norm() const;        // any CLIP_NORM
  bool splits_backward() const;      // any I or W action
  size_t action_count() const;
};

// Which rank runs each (stage, micro-batch), read off the compute actions.
// A stage may run on several ranks (replicated, as in Chimera), but each
// (stage, micro-batch) runs on one.
class Placement {
 public:
  // REQUIRES: every action's stage and micro-batch are in range.
  // Throws baton::Error if one (stage, micro-batch) has compute on two ranks.
  explicit Placement(const Schedule& schedule);

  // -1 when no compute action names (stage, microbatch).
  int rank_of(int stage, int microbatch) const {
    return owner_[static_cast<size_t>(stage) * microbatches_ + microbatch];
  }
  // Distinct ranks holding `stage`, ascending.
  std::vector<int> ranks_of_stage(int stage) const;
  // The stages `rank` holds, ascending.
  std::vector<int> stages_of_rank(int rank) const;
  int stages() const { return stages_; }
  int microbatches() const { return microbatches_; }

 private:
  int stages_ = 0;
  int microbatches_ = 0;
  std::vector<int> owner_;
};

// The rank a named map puts `stage` on (for Bidirectional: in the down pipe).
// REQUIRES: map is not Custom.
int rank_for_stage(StageMap map, int ranks, int stage);

// Classifies the layout the compute actions of `schedule` show.
StageMap detect_stage_map(const Schedule& schedule, const Placement& placement);

}  // namespace baton::schedule
