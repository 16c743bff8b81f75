#include <algorithm>
#include <nlohmann/json.hpp>

#include "baton/core/error.h"
#include "baton/trace/event_label.h"
#include "baton/trace/writers.h"

namespace baton::trace {
namespace {

// Chrome trace times are microseconds; cost-model units count as ms.
double microseconds_per_unit(const std::string& unit) {
  if (unit.empty() || unit == "ms") return 1e3;
  if (unit == "us") return 1;
  if (unit == "s") return 1e6;
  BATON_CHECK(false, "[trace.to_chrome_trace] time unit \"", unit,
              "\" is not one of \"\", \"ms\", \"us\", \"s\"");
  return 0;
}

}  // namespace

std::string to_chrome_trace(const Timeline& timeline) {
  detail::check_events(timeline, "trace.to_chrome_trace");
  const double scale = microseconds_per_unit(timeline.time_unit);
  const bool with_stage = detail::several_stages_per_rank(timeline);

  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 0},
                    {"tid", 0},
                    {"args", {{"name", timeline.title.empty() ? "baton" : timeline.title}}}});
  std::vector<char> reduces(timeline.ranks, 0);
  for (const Event& e : timeline.events)
    if (schedule::is_step_action(e.kind)) reduces[e.rank] = 1;
  const bool any_reduction = std::find(reduces.begin(), reduces.end(), 1) != reduces.end();
  for (int r = 0; r < timeline.ranks; ++r) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    // Without a sort index Perfetto orders tracks by name: "rank 10" before "rank 2".
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"args", {{"sort_index", any_reduction ? 2 * r : r}}}});
    if (!reduces[r]) continue;
    const int tid = timeline.ranks + r;
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", tid},
                      {"args", {{"name", "rank " + std::to_string(r) + " dp"}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", tid},
                      {"args", {{"sort_index", 2 * r + 1}}}});
  }
  for (const Event& e : timeline.events) {
    const std::string kind(schedule::to_string(e.kind));
    events.push_back({{"name", detail::event_label(e, with_stage)},
                      {"cat", kind},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", schedule::is_step_action(e.kind) ? timeline.ranks + e.rank : e.rank},
                      {"ts", e.start * scale},
                      {"dur", (e.end - e.start) * scale},
                      {"args",
                       {{"stage", e.stage},
                        {e.kind == schedule::ActionKind::REDUCE_TIED ? "group"
                         : e.kind == schedule::ActionKind::CLIP_NORM ? "clip"
                         : schedule::is_step_action(e.kind)          ? "bucket"
                                                                     : "microbatch",
                         e.microbatch},
                        {"kind", kind}}}});
  }
  // Memory points as counters ("C"), a track per rank: "memory rank r" in MiB.
  for (const MemoryPoint& m : timeline.memory) {
    events.push_back({{"name", "memory rank " + std::to_string(m.rank)},
                      {"ph", "C"},
                      {"pid", 0},
                      {"ts", m.time * scale},
                      {"args", {{"MiB", m.bytes / (1024.0 * 1024.0)}}}});
  }
  nlohmann::json trace = {
      {"traceEvents", std::move(events)},
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"title", timeline.title},
        {"time_unit", timeline.time_unit.empty() ? "cost-model units (as ms)" : timeline.time_unit},
        {"bubble_fraction", bubble_fraction(timeline)}}}};
  return trace.dump() + "\n";
}

}  // namespace baton::trace
