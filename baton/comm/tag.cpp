#include "baton/comm/tag.h"

#include "baton/core/error.h"

namespace baton::comm {

std::string to_string(const Tag& tag) {
  return ::baton::detail::concat("stage ", tag.stage, " micro-batch ", tag.microbatch,
                                 tag.dir == Direction::kForward ? " forward" : " backward");
}

Tag skip_tag(const schedule::Action& action, int stages) {
  using schedule::ActionKind;
  const bool forward = action.kind == ActionKind::SEND_F || action.kind == ActionKind::RECV_F;
  return Tag{stages + action.skip, action.microbatch,
             forward ? Direction::kForward : Direction::kBackward};
}

Tag tag_for(const schedule::Action& action) {
  using schedule::ActionKind;
  BATON_ASSERT(action.skip < 0,
               "a skip's transfer takes skip_tag(): ", schedule::to_string(action));
  switch (action.kind) {
    case ActionKind::SEND_F:
      return Tag{action.stage, action.microbatch, Direction::kForward};
    case ActionKind::RECV_F:
      return Tag{action.stage - 1, action.microbatch, Direction::kForward};
    case ActionKind::SEND_B:
      return Tag{action.stage, action.microbatch, Direction::kBackward};
    case ActionKind::RECV_B:
      return Tag{action.stage + 1, action.microbatch, Direction::kBackward};
    default:
      break;
  }
  throw Error(::baton::detail::concat("[comm.tag_for] only SEND/RECV actions carry a tag, got ",
                                      schedule::to_string(action)));
}

Tag loss_tag(int stages) {
  return Tag{stages - 1, kReservedMicrobatch, Direction::kForward};
}

Tag tied_sum_tag(int group) {
  return Tag{group, kReservedMicrobatch, Direction::kBackward};
}

namespace detail {

int c10d_tag(const Tag& tag, Part part) {
  BATON_CHECK(tag.stage >= 0 && tag.stage < kMaxStages, "[comm.tag] stage must be in [0, ",
              kMaxStages, "), got ", tag.stage);
  BATON_CHECK(tag.microbatch >= 0 && tag.microbatch < kMaxMicrobatches,
              "[comm.tag] micro-batch must be in [0, ", kMaxMicrobatches, "), got ",
              tag.microbatch);
  const std::int64_t value =
      ((static_cast<std::int64_t>(tag.microbatch) * kMaxStages + tag.stage) * 2 +
       static_cast<int>(tag.dir)) *
          2 +
      static_cast<int>(part);
  return static_cast<int>(value);
}

}  // namespace detail
}  // namespace baton::comm
