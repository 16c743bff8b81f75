#include "baton/schedule/action.h"

#include <array>
#include <cctype>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"

namespace baton::schedule {
namespace {

constexpr std::array<std::string_view, kActionKindCount> kNames = {
    "F",      "B",           "I",           "W",         "SEND_F",         "RECV_F",  "SEND_B",
    "RECV_B", "REDUCE_GRAD", "REDUCE_TIED", "CLIP_NORM", "REDUCE_SCATTER", "UNSHARD", "RESHARD"};

// Reads the digits at `pos`, advancing past all of them. Returns their value,
// -1 if there are none, or `limit` + 1 if the value exceeds `limit`.
long read_number(std::string_view text, size_t& pos, long limit) {
  size_t start = pos;
  long value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    if (value <= limit) value = value * 10 + (text[pos] - '0');
    ++pos;
  }
  if (pos == start) return -1;
  return value > limit ? limit + 1 : value;
}

}  // namespace

std::string_view to_string(ActionKind kind) {
  return kNames[static_cast<size_t>(kind)];
}

bool is_compute(ActionKind kind) {
  return kind == ActionKind::F || kind == ActionKind::B || kind == ActionKind::I ||
         kind == ActionKind::W;
}

bool is_communication(ActionKind kind) {
  return kind == ActionKind::SEND_F || kind == ActionKind::RECV_F || kind == ActionKind::SEND_B ||
         kind == ActionKind::RECV_B;
}

std::string to_string(const Action& action) {
  std::string out = std::to_string(action.stage);
  out += to_string(action.kind);
  out += std::to_string(action.microbatch);
  if (action.skip >= 0) out += "@" + std::to_string(action.skip);
  return out;
}

Action parse_action(std::string_view token) {
  const std::string quoted = "\"" + printable(token) + "\"";
  size_t pos = 0;
  const long stage = read_number(token, pos, kMaxStages - 1);
  BATON_CHECK(stage >= 0, "[schedule.parse] action ", quoted,
              " must start with a stage number, as in 2F5");
  BATON_CHECK(stage < kMaxStages, "[schedule.parse] action ", quoted, ": stage ",
              printable(token.substr(0, pos)), " exceeds the limit of ", kMaxStages - 1);
  size_t kind_start = pos;
  while (pos < token.size() && !std::isdigit(static_cast<unsigned char>(token[pos]))) ++pos;
  const std::string_view kind_text = token.substr(kind_start, pos - kind_start);
  int kind_index = -1;
  for (int k = 0; k < kActionKindCount; ++k) {
    if (kNames[k] == kind_text) kind_index = k;
  }
  BATON_CHECK(kind_index >= 0, "[schedule.parse] action ", quoted, " has unknown kind \"",
              printable(kind_text),
              "\" (expected F, B, I, W, SEND_F, RECV_F, SEND_B, RECV_B, REDUCE_GRAD, REDUCE_TIED, "
              "CLIP_NORM, REDUCE_SCATTER, UNSHARD or RESHARD)");
  const auto kind = static_cast<ActionKind>(kind_index);
  // PyTorch's "1REDUCE_GRAD" reduces the stage's gradients: bucket 0 of one;
  // its "1UNSHARD" and "1RESHARD" act on the whole stage.
  if ((kind == ActionKind::REDUCE_GRAD || is_sharding(kind)) && pos == token.size())
    return Action{kind, static_cast<int>(stage), 0};
  // The number a reduction ends with is a bucket or a tie group, not a micro-batch.
  const char* number = is_grad_reduction(kind)           ? "bucket"
                       : kind == ActionKind::REDUCE_TIED ? "tie group"
                       : kind == ActionKind::CLIP_NORM   ? "clip"
                       : is_sharding(kind)               ? "zero"
                                                         : "micro-batch";
  const char* example = kind == ActionKind::REDUCE_GRAD      ? "2REDUCE_GRAD0"
                        : kind == ActionKind::REDUCE_SCATTER ? "2REDUCE_SCATTER0"
                        : kind == ActionKind::REDUCE_TIED    ? "2REDUCE_TIED0"
                        : kind == ActionKind::CLIP_NORM      ? "0CLIP_NORM0"
                        : is_sharding(kind)                  ? "1UNSHARD0"
                                                             : "2F5";
  const size_t microbatch_start = pos;
  const long microbatch = read_number(token, pos, kMaxMicrobatches - 1);
  const size_t microbatch_end = pos;
  // A skip connection's transfer: "1SEND_F5@0".
  long skip = -1;
  if (microbatch >= 0 && pos < token.size() && token[pos] == '@' && is_communication(kind)) {
    ++pos;
    skip = read_number(token, pos, kMaxSkips - 1);
    BATON_CHECK(skip >= 0 && pos == token.size(), "[schedule.parse] action ", quoted,
                " must end with a skip number after \"@\", as in 1SEND_F5@0");
    BATON_CHECK(skip < kMaxSkips, "[schedule.parse] action ", quoted, ": skip ",
                printable(token.substr(microbatch_end + 1)), " exceeds the limit of ",
                kMaxSkips - 1);
  }
  BATON_CHECK(microbatch >= 0 && pos == token.size(), "[schedule.parse] action ", quoted,
              " must end with a ", number, " number, as in ", example);
  BATON_CHECK(microbatch < kMaxMicrobatches, "[schedule.parse] action ", quoted, ": ", number, " ",
              printable(token.substr(microbatch_start, microbatch_end - microbatch_start)),
              " exceeds the limit of ", kMaxMicrobatches - 1);
  return Action{kind, static_cast<int>(stage), static_cast<int>(microbatch),
                static_cast<int>(skip)};
}

}  // namespace baton::schedule
