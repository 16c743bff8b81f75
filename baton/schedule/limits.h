// Size limits of a schedule. They are checked before anything is allocated per
// action or per (stage, micro-batch): by generate() from the requested shape,
// by parse_schedule() while it reads, by lower() before it inserts the
// communication. So an oversized request fails at once with a message naming
// the size and the limit, instead of exhausting memory.
#pragma once

#include <cstddef>

namespace baton::schedule {

// Actions in one schedule, communication included. Generating, validating and
// simulating 1F1B at this size takes about 2.3 GB of memory and 30 seconds.
inline constexpr size_t kMaxActions = 50'000'000;
inline constexpr int kMaxRanks = 4096;
inline constexpr int kMaxMicrobatches = 1 << 20;
inline constexpr int kMaxVirtualStages = 1024;
// Skip connections of one schedule (Schedule::skips).
inline constexpr int kMaxSkips = 1024;
inline constexpr int kMaxStages = kMaxRanks * kMaxVirtualStages;

}  // namespace baton::schedule
