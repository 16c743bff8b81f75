// The message tag (comm/tag.h) of a schedule's transfer: both sides of a
// SEND/RECV pair derive it from their action, so they cannot disagree.
#pragma once

#include "baton/comm/tag.h"
#include "baton/schedule/action.h"

namespace baton::runtime {

// The Tag of the tensor that a SEND_F/RECV_F/SEND_B/RECV_B action moves.
// REQUIRES: action is a communication action.
comm::Tag tag_for(const schedule::Action& action);

// The Tag of a skip connection's transfer (Action::skip >= 0) in a schedule
// of `stages` stages: {stages + skip, micro-batch, direction}, beyond every
// stage's own tags. REQUIRES: stages + skips <= comm::kMaxStages.
comm::Tag skip_tag(const schedule::Action& action, int stages);

}  // namespace baton::runtime
