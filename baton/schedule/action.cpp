#include "baton/schedule/action.h"

#include <array>
#include <cctype>

#include "baton/core/error.h"

namespace baton::schedule {
namespace {

constexpr std::array<std::string_view, kActionKindCount> kNames = {
    "F", "B", "I", "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B"};

// Reads a non-negative integer at `pos`, advancing it; -1 if there is none.
long read_number(std::string_view text, size_t& pos) {
  size_t start = pos;
  long value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    value = value * 10 + (text[pos] - '0');
    if (value > 1000000000L) return -2;
    ++pos;
  }
  return pos == start ? -1 : value;
}

}  // namespace

std::string_view to_string(ActionKind kind) {
  return kNames[static_cast<size_t>(kind)];
}

bool is_compute(ActionKind kind) {
  return kind == ActionKind::F || kind == ActionKind::B || kind == ActionKind::I ||
         kind == ActionKind::W;
}

bool is_communication(ActionKind kind) { return !is_compute(kind); }

std::string to_string(const Action& action) {
  std::string out = std::to_string(action.stage);
  out += to_string(action.kind);
  out += std::to_string(action.microbatch);
  return out;
}

Action parse_action(std::string_view token) {
  size_t pos = 0;
  const long stage = read_number(token, pos);
  BATON_CHECK(stage >= 0, "[schedule.parse] action \"", token,
              "\" must start with a stage number, as in 2F5");
  size_t kind_start = pos;
  while (pos < token.size() && !std::isdigit(static_cast<unsigned char>(token[pos]))) ++pos;
  const std::string_view kind_text = token.substr(kind_start, pos - kind_start);
  int kind_index = -1;
  for (int k = 0; k < kActionKindCount; ++k) {
    if (kNames[k] == kind_text) kind_index = k;
  }
  BATON_CHECK(kind_index >= 0, "[schedule.parse] action \"", token, "\" has unknown kind \"",
              kind_text, "\" (expected F, B, I, W, SEND_F, RECV_F, SEND_B or RECV_B)");
  const long microbatch = read_number(token, pos);
  BATON_CHECK(microbatch >= 0 && pos == token.size(), "[schedule.parse] action \"", token,
              "\" must end with a micro-batch number, as in 2F5");
  return Action{static_cast<ActionKind>(kind_index), static_cast<int>(stage),
                static_cast<int>(microbatch)};
}

}  // namespace baton::schedule
