#include "baton/runtime/action_tag.h"

#include "baton/core/error.h"

namespace baton::runtime {

comm::Tag skip_tag(const schedule::Action& action, int stages) {
  using schedule::ActionKind;
  const bool forward = action.kind == ActionKind::SEND_F || action.kind == ActionKind::RECV_F;
  return comm::Tag{stages + action.skip, action.microbatch,
                   forward ? comm::Direction::kForward : comm::Direction::kBackward};
}

comm::Tag tag_for(const schedule::Action& action) {
  using schedule::ActionKind;
  BATON_ASSERT(action.skip < 0,
               "a skip's transfer takes skip_tag(): ", schedule::to_string(action));
  switch (action.kind) {
    case ActionKind::SEND_F:
      return comm::Tag{action.stage, action.microbatch, comm::Direction::kForward};
    case ActionKind::RECV_F:
      return comm::Tag{action.stage - 1, action.microbatch, comm::Direction::kForward};
    case ActionKind::SEND_B:
      return comm::Tag{action.stage, action.microbatch, comm::Direction::kBackward};
    case ActionKind::RECV_B:
      return comm::Tag{action.stage + 1, action.microbatch, comm::Direction::kBackward};
    default:
      break;
  }
  throw Error(::baton::detail::concat("[runtime.tag_for] only SEND/RECV actions carry a tag, got ",
                                      schedule::to_string(action)));
}

}  // namespace baton::runtime
