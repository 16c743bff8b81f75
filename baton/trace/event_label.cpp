#include "baton/trace/event_label.h"

#include <cmath>
#include <map>

#include "baton/core/error.h"

namespace baton::trace::detail {

bool several_stages_per_rank(const Timeline& timeline) {
  std::map<int, int> stage_of_rank;
  for (const Event& e : timeline.events) {
    auto [it, inserted] = stage_of_rank.emplace(e.rank, e.stage);
    if (!inserted && it->second != e.stage) return true;
  }
  return false;
}

std::string event_label(const Event& event, bool with_stage) {
  std::string label = with_stage ? std::to_string(event.stage) : std::string();
  label += schedule::to_string(event.kind);
  label += std::to_string(event.microbatch);
  return label;
}

void check_events(const Timeline& timeline, const char* where) {
  BATON_CHECK(timeline.ranks >= 0, "[", where, "] ranks must be at least 0, got ", timeline.ranks);
  for (const Event& e : timeline.events) {
    const std::string name = std::to_string(e.stage) + std::string(schedule::to_string(e.kind)) +
                             std::to_string(e.microbatch);
    BATON_CHECK(e.rank >= 0 && e.rank < timeline.ranks, "[", where, "] event ", name,
                " is on rank ", e.rank, " but the timeline has ", timeline.ranks, " ranks");
    BATON_CHECK(e.start >= 0 && e.end >= e.start, "[", where, "] event ", name, " on rank ", e.rank,
                " runs from ", e.start, " to ", e.end,
                "; it must start at or after 0 and end at or after its start");
  }
  for (const MemoryPoint& m : timeline.memory) {
    BATON_CHECK(m.rank >= 0 && m.rank < timeline.ranks, "[", where, "] a memory point is on rank ",
                m.rank, " but the timeline has ", timeline.ranks, " ranks");
    BATON_CHECK(std::isfinite(m.time) && m.time >= 0 && std::isfinite(m.bytes) && m.bytes >= 0, "[",
                where, "] rank ", m.rank, "'s memory point (", m.time, ", ", m.bytes,
                " bytes) must have a finite time and bytes of at least 0");
  }
}

}  // namespace baton::trace::detail
