// One step of a pipeline schedule: a kind, the stage it acts for, and the
// micro-batch. Compact notation (as in torch.distributed.pipelining):
// "2F5" = stage 2, forward, micro-batch 5; "1SEND_F5" = stage 1 sends the
// output of its forward of micro-batch 5 to stage 2; "2RECV_F5" = stage 2
// receives that input. SEND_B/RECV_B carry input gradients backwards: stage s
// sends to stage s-1 ("sSEND_Bm"), and stage s receives from stage s+1
// ("sRECV_Bm"). "1REDUCE_GRAD0" = stage 1 all-reduces gradient bucket 0 over
// its data-parallel group: for REDUCE_GRAD the micro-batch slot holds the
// bucket index (bucket 0 holds the stage's last layers, reduced first, as in
// DDP). PyTorch writes it without a number ("1REDUCE_GRAD"), read as bucket 0.
// "0REDUCE_TIED0" = stage 0 sums the gradients of its tied copies with the
// other copies of tie group 0 within the pipeline: a tied weight's copies on
// other stages (a GPT's embedding and LM head) and a replicated stage's copy
// on another rank (Chimera). The number is the group: the lowest stage of
// the group's stages. See tied_reduction.h. "0CLIP_NORM0" = the rank whose
// lowest stage is 0 adds its share of the squared gradient norm to every
// other rank's (an all-reduce over the world) and scales its gradients so the
// global norm is at most the clip value; the last action of every rank's list,
// its number always 0. See clip_norm.h.
//
// ZeRO (schedule/sharding.h): "1REDUCE_SCATTER0" = stage 1 reduce-scatters
// gradient bucket 0 over its dp group, keeping this replica's shard of each
// gradient (ZeRO-2 and 3; in place of REDUCE_GRAD). "1UNSHARD0" = stage 1
// all-gathers its parameters' shards over the dp group (the replicas' updates
// of ZeRO-1/2, the whole weights of ZeRO-3) before its first F; "1RESHARD0" =
// stage 1 frees its gathered parameters after its last backward (ZeRO-3).
// Their number is 0 (PyTorch writes "1UNSHARD", read as 0).
//
// A skip connection's transfers (Schedule::skips, skip.h) are SEND/RECV
// actions with the skip's index after "@": "1SEND_F5@0" = stage 1, which
// stashes skip 0, sends micro-batch 5's stashed tensor straight to the rank
// of the stage that pops it, "4RECV_F5@0" = stage 4 receives it there;
// "4SEND_B5@0" and "1RECV_B5@0" carry its gradient back. The stage is the
// producer's for SEND_F and RECV_B, the consumer's for RECV_F and SEND_B.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace baton::schedule {

enum class ActionKind : std::uint8_t {
  F,               // forward
  B,               // full backward: input and weight gradients together
  I,               // backward for the input gradient only
  W,               // backward for the weight gradients only (after I)
  SEND_F,          // send forward activation to stage + 1
  RECV_F,          // receive forward activation from stage - 1
  SEND_B,          // send input gradient to stage - 1
  RECV_B,          // receive output gradient from stage + 1
  REDUCE_GRAD,     // all-reduce one gradient bucket of the stage over the dp group
  REDUCE_TIED,     // sum the stage's tied gradient copies within the pipeline
  CLIP_NORM,       // the global gradient norm over every rank, and the clip by it
  REDUCE_SCATTER,  // reduce-scatter one gradient bucket of the stage over the dp group
  UNSHARD,         // all-gather the stage's parameter shards over the dp group
  RESHARD,         // free the stage's gathered parameters, keeping this replica's shard
};

inline constexpr int kActionKindCount = 14;

// "F", "B", "I", "W", "SEND_F", ...
std::string_view to_string(ActionKind kind);

bool is_compute(ActionKind kind);        // F, B, I, W
bool is_communication(ActionKind kind);  // SEND_*, RECV_* (point to point)
// A gradient reduction: REDUCE_GRAD or REDUCE_SCATTER (a collective over the
// stage's dp group on the rank's communication stream, which does not hold up
// the compute after it), REDUCE_TIED (a sum with the stage's copies on other stages or
// ranks, after all of the rank's compute) or CLIP_NORM (the norm's sum over
// the world, after both). Its number is a bucket, a group or 0, never a
// micro-batch.
inline bool is_reduction(ActionKind kind) {
  return kind == ActionKind::REDUCE_GRAD || kind == ActionKind::REDUCE_SCATTER ||
         kind == ActionKind::REDUCE_TIED || kind == ActionKind::CLIP_NORM;
}
// A dp reduction of a gradient bucket: REDUCE_GRAD (all-reduce) or
// REDUCE_SCATTER (each replica keeps its shard). The number is the bucket.
inline bool is_grad_reduction(ActionKind kind) {
  return kind == ActionKind::REDUCE_GRAD || kind == ActionKind::REDUCE_SCATTER;
}
// ZeRO's parameter actions: UNSHARD and RESHARD of a stage, number 0.
inline bool is_sharding(ActionKind kind) {
  return kind == ActionKind::UNSHARD || kind == ActionKind::RESHARD;
}
// An action of the step, not of a micro-batch: a reduction or a sharding
// action, whose number is a bucket, a group or 0. It is rank-local to the
// pipeline (a dp collective, or a sum after the rank's other actions).
inline bool is_step_action(ActionKind kind) {
  return is_reduction(kind) || is_sharding(kind);
}
// The backwards that produce weight gradients (what REDUCE_GRAD reduces).
inline bool is_weight_backward(ActionKind kind) {
  return kind == ActionKind::B || kind == ActionKind::W;
}
// The backward that produces the input gradient the previous stage waits for.
inline bool is_input_backward(ActionKind kind) {
  return kind == ActionKind::B || kind == ActionKind::I;
}

struct Action {
  ActionKind kind = ActionKind::F;
  int stage = 0;
  // REDUCE_GRAD, REDUCE_SCATTER: the bucket index; REDUCE_TIED: the group;
  // CLIP_NORM, UNSHARD, RESHARD: 0
  int microbatch = 0;
  // SEND/RECV of a skip connection: its index in Schedule::skips; -1 otherwise.
  int skip = -1;

  friend bool operator==(const Action& a, const Action& b) {
    return a.kind == b.kind && a.stage == b.stage && a.microbatch == b.microbatch &&
           a.skip == b.skip;
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};

// "2F5", "1REDUCE_GRAD0", "1SEND_F5@0"
std::string to_string(const Action& action);

// Parses one token of compact notation; throws baton::Error naming the token.
Action parse_action(std::string_view token);

}  // namespace baton::schedule
