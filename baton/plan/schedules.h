// The schedules the planner searches: every synchronous schedule baton runs
// whose costs the planner models, one row each, with what the search needs to
// know of it (its stage map, its stage chunks per rank, whether it splits the
// backward, the micro-batches it needs). Adding a schedule to the search is
// adding its row to kSearched in schedules.cpp.
#pragma once

#include <string>
#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::plan {

struct SearchedSchedule {
  const char* name;
  schedule::StageMap map;  // Loop or V
  // Stage chunks per rank; 0: any v >= 2 with at least one layer per chunk
  // (interleaved). V schedules hold 2.
  int chunks;
  bool splits_backward;  // I and W apart (the zero-bubble family): W may wait
  int min_m_per_rank;    // needs m >= min_m_per_rank * p (0: any m)
  bool equal_groups;     // m in equal groups of at least p (Megatron's interleaving)
  // Micro-batches' worth of stage chunks rank 0 holds at its peak, at most
  // what the simulator counts (tests/plan/costs_test.cpp checks each row).
  int (*peak_chunks)(int p, int m, int v);
};

// In a stable order: 1f1b first.
const std::vector<SearchedSchedule>& searched_schedules();
// nullptr when the planner does not search `name`.
const SearchedSchedule* find_searched_schedule(const std::string& name);
std::vector<std::string> searched_schedule_names();

// Parses --schedules ("1f1b,interleaved"): throws baton::Error (one line)
// naming an empty list, an empty or repeated item, a schedule baton does not
// know, or one it knows but the planner does not search (and why).
std::vector<std::string> parse_schedule_list(const std::string& text);

}  // namespace baton::plan
