// Helpers the timeline writers share: how an event is labelled, and the
// checks every writer makes before drawing.
#pragma once

#include <string>

#include "baton/trace/timeline.h"

namespace baton::trace::detail {

// True when some rank runs events of more than one stage (interleaved, ZB-V,
// Chimera); labels then carry the stage.
bool several_stages_per_rank(const Timeline& timeline);

// "F3", or "2F3" when `with_stage`; communication kinds as "SEND_F3".
std::string event_label(const Event& event, bool with_stage);

// Throws baton::Error naming `where` and the event when an event's rank is
// outside [0, ranks), it starts before 0, or it ends before it starts; and
// likewise for a memory point off the ranks, before 0 or not finite.
void check_events(const Timeline& timeline, const char* where);

}  // namespace baton::trace::detail
