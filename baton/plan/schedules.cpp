#include "baton/plan/schedules.h"

#include <algorithm>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/generator.h"

namespace baton::plan {
namespace {

using schedule::StageMap;

int all_of_them(int, int m, int) {
  return m;
}
int one_per_rank(int p, int m, int) {
  return std::min(p, m);
}
// Megatron's warm-up: (p - 1) 2 + (v - 1) g + 1 chunks, g the group size.
int interleaved_peak(int p, int m, int v) {
  if (m == p) return m * v;
  const int g = m / std::max(1, m / p);
  return std::min(m * v, (p - 1) * 2 + (v - 1) * g + 1);
}
// Rank 0's peaks of the V schedules as the simulator counts them (not the
// busiest rank's, which v-half and v-min promise).
int zb_v_peak(int p, int m, int) {
  return std::min(2 * p, m + 1);
}
int dualpipe_v_peak(int p, int, int) {
  return 2 * p + 1;  // m >= 2p
}
int v_half_peak(int p, int m, int) {
  return std::min(p / 2 + 1, m + 1);
}
int v_min_peak(int p, int m, int) {
  return std::min(2 * ((p + 3) / 3), m + 1);
}

// One row per schedule: name, map, chunks (0: any v >= 2), split backward,
// m >= this x p, equal groups of m, rank 0's peak.
const std::vector<SearchedSchedule> kSearched = {
    {"1f1b", StageMap::Loop, 1, false, 0, false, one_per_rank},
    {"gpipe", StageMap::Loop, 1, false, 0, false, all_of_them},
    {"interleaved", StageMap::Loop, 0, false, 0, true, interleaved_peak},
    {"interleaved-zb", StageMap::Loop, 0, true, 0, true, interleaved_peak},
    {"zb-h1", StageMap::Loop, 1, true, 0, false, one_per_rank},
    {"zb-h2", StageMap::Loop, 1, true, 2, false, one_per_rank},
    {"zb-v", StageMap::V, 2, true, 0, false, zb_v_peak},
    {"dualpipev", StageMap::V, 2, true, 2, false, dualpipe_v_peak},
    {"v-half", StageMap::V, 2, true, 0, false, v_half_peak},
    {"v-min", StageMap::V, 2, true, 0, false, v_min_peak},
};

// Schedules baton runs that the planner leaves out, and why; besides these,
// every schedule without a flush (schedule::flushes).
struct NotSearched {
  const char* name;
  const char* because;
};
const NotSearched kNotSearched[] = {
    {"naive", "a baseline that keeps one micro-batch in the pipeline"},
    {"looped-bfs", "it holds every micro-batch of every chunk (GPipe's memory)"},
    {"chimera", "its replicated stages' gradient exchange is not modelled"},
    {"zb-auto", "its order is built from measured costs; zb-h2 and zb-v cover it"},
};

const char* not_searched_because(const std::string& name) {
  for (const NotSearched& n : kNotSearched)
    if (name == n.name) return n.because;
  if (!schedule::flushes(name)) return "it has no flush (asynchronous weights)";
  return nullptr;
}

}  // namespace

const std::vector<SearchedSchedule>& searched_schedules() {
  return kSearched;
}

const SearchedSchedule* find_searched_schedule(const std::string& name) {
  for (const SearchedSchedule& s : kSearched)
    if (name == s.name) return &s;
  return nullptr;
}

std::vector<std::string> searched_schedule_names() {
  std::vector<std::string> out;
  for (const SearchedSchedule& s : kSearched) out.emplace_back(s.name);
  return out;
}

std::vector<std::string> parse_schedule_list(const std::string& text) {
  std::string searched;
  for (const SearchedSchedule& s : kSearched)
    searched += (searched.empty() ? "" : ", ") + std::string(s.name);
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    BATON_CHECK(!item.empty(), "[plan] --schedules ", "\"", printable(text), "\"",
                " has an empty item; give a comma-separated list of ", searched);
    const auto& known = schedule::schedule_names();
    BATON_CHECK(std::find(known.begin(), known.end(), item) != known.end(),
                "[plan] --schedules: unknown schedule \"", printable(item),
                "\" (searched: ", searched, ")");
    const char* why = not_searched_because(item);
    BATON_CHECK(find_searched_schedule(item), "[plan] --schedules: \"", printable(item),
                "\" is not searched by the planner: ", why ? why : "its costs are not modelled",
                " (searched: ", searched, ")");
    BATON_CHECK(std::find(out.begin(), out.end(), item) == out.end(), "[plan] --schedules: \"",
                printable(item), "\" is given twice");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace baton::plan
