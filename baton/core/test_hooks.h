// Fault injection for the restart tests: a variable in the environment names
// the points where a process kills itself (or its launcher) with SIGKILL.
//
// The value is a comma-separated list of hooks "[^]RANK:STEP[:MARKER]". A
// hook fires at the point named STEP on rank RANK; "^" kills the parent
// process (the local launcher) instead of this one. With a MARKER file, the
// hook fires once per job: only when it creates MARKER (O_EXCL), and only
// after every earlier hook of the list has fired (their markers exist), so
// that "1:6:a,0:4:b" kills rank 1 after step 6 and then rank 0 when the
// restarted run reaches step 4. Without a marker it fires every time.
// Nothing happens when the variable is unset or does not parse.
#pragma once

#include <cstdint>

namespace baton {

// Fires the hook of `variable` for (`rank`, `step`), if any.
void kill_if_hooked(const char* variable, int rank, int64_t step);

// True when a hook of `variable` for (`rank`, `step`) would fire now (its
// marker is then taken): for callers that leave something behind first.
bool hook_fires(const char* variable, int rank, int64_t step, bool* kill_parent);

}  // namespace baton
