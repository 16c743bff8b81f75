// One step of a pipeline schedule: a kind, the stage it acts for, and the
// micro-batch. Compact notation (as in torch.distributed.pipelining):
// "2F5" = stage 2, forward, micro-batch 5; "1SEND_F5" = stage 1 sends the
// output of its forward of micro-batch 5 to stage 2; "2RECV_F5" = stage 2
// receives that input. SEND_B/RECV_B carry input gradients backwards: stage s
// sends to stage s-1 ("sSEND_Bm"), and stage s receives from stage s+1
// ("sRECV_Bm").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace baton::schedule {

enum class ActionKind : std::uint8_t {
  F,       // forward
  B,       // full backward: input and weight gradients together
  I,       // backward for the input gradient only
  W,       // backward for the weight gradients only (after I)
  SEND_F,  // send forward activation to stage + 1
  RECV_F,  // receive forward activation from stage - 1
  SEND_B,  // send input gradient to stage - 1
  RECV_B,  // receive output gradient from stage + 1
};

inline constexpr int kActionKindCount = 8;

// "F", "B", "I", "W", "SEND_F", ...
std::string_view to_string(ActionKind kind);

bool is_compute(ActionKind kind);        // F, B, I, W
bool is_communication(ActionKind kind);  // SEND_*, RECV_*
// The backward that produces the input gradient the previous stage waits for.
inline bool is_input_backward(ActionKind kind) {
  return kind == ActionKind::B || kind == ActionKind::I;
}

struct Action {
  ActionKind kind = ActionKind::F;
  int stage = 0;
  int microbatch = 0;

  friend bool operator==(const Action& a, const Action& b) {
    return a.kind == b.kind && a.stage == b.stage && a.microbatch == b.microbatch;
  }
  friend bool operator!=(const Action& a, const Action& b) { return !(a == b); }
};

// "2F5"
std::string to_string(const Action& action);

// Parses one token of compact notation; throws baton::Error naming the token.
Action parse_action(std::string_view token);

}  // namespace baton::schedule
