// Message tags for point-to-point tensors between pipeline stages.
//
// A Tag names one tensor of one training step: the stage that SENDS it, the
// micro-batch, and the direction (activations forward, gradients backward).
// Both sides name the same Tag: stage 2's SEND_F of micro-batch 5 and stage
// 3's RECV_F of micro-batch 5 both use Tag{2, 5, kForward}; stage 3's SEND_B
// and stage 2's RECV_B of micro-batch 5 both use Tag{3, 5, kBackward}.
// runtime::tag_for() (runtime/action_tag.h) derives it from a schedule
// action so the two sides cannot disagree.
//
// Mapping to c10d's int tag (every value fits in 31 bits, so it is >= 0):
//
//   c10d_tag = ((microbatch * kMaxStages + stage) * 2 + direction) * 2 + part
//
// where part is 0 for a tensor's message and 1 for a transport's follow-up. The mapping is
// injective for 0 <= stage < kMaxStages and 0 <= microbatch < kMaxMicrobatches,
// so no two messages of one step share a c10d tag. Messages of consecutive
// steps do share tags, and steps overlap (a rank starts step k+1 while its
// peers still run step k), so a message of step k+1 may be sent before the
// receiver has taken step k's. Every transport keeps the order of messages
// with the same (peer, tag) (shared memory: one ring per source drained into
// per-(peer, tag) queues; Gloo: a slot's sends and receives match in order;
// NCCL: headers on one control tag per peer), and a rank posts the receives
// of a tag in step order, so the k-th message of a (peer, tag) always meets
// the k-th receive: step k+1 never overtakes step k.
//
// Micro-batch kReservedMicrobatch carries a step's control messages, never a
// micro-batch's tensors: {last stage, kReservedMicrobatch, kForward} is the
// step's loss (loss_tag: the last stage sends nothing forward), {g,
// kReservedMicrobatch, kBackward} the gradient sum of tie group g (tied_sum_tag:
// a tied weight's copies, or a stage held by several ranks as in Chimera).
#pragma once

#include <cstdint>
#include <string>

namespace baton::comm {

enum class Direction : std::uint8_t {
  kForward = 0,   // activations, stage s -> s + 1
  kBackward = 1,  // input gradients, stage s -> s - 1
};

inline constexpr int kMaxStages = 1 << 10;
inline constexpr int kMaxMicrobatches = 1 << 19;
inline constexpr int kReservedMicrobatch = kMaxMicrobatches - 1;

struct Tag {
  int stage = 0;  // the sending stage
  int microbatch = 0;
  Direction dir = Direction::kForward;

  friend bool operator==(const Tag& a, const Tag& b) {
    return a.stage == b.stage && a.microbatch == b.microbatch && a.dir == b.dir;
  }
};

// "stage 2 micro-batch 5 forward"
std::string to_string(const Tag& tag);

// The step's loss, which each rank holding the last of `stages` stages sends
// to every other rank.
Tag loss_tag(int stages);

// The gradient sum of tie group `group` (REDUCE_TIED) between two of its ranks.
Tag tied_sum_tag(int group);

namespace detail {

// kMessage carries a tensor; kSecond its follow-up when a transport needs one
// (gloo_transport.h: a size change).
enum class Part : int { kMessage = 0, kSecond = 1 };

// The c10d tag of one part of one message; throws baton::Error when the
// stage or micro-batch is outside the range the mapping covers.
int c10d_tag(const Tag& tag, Part part);

}  // namespace detail
}  // namespace baton::comm
