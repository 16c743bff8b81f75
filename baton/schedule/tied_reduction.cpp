#include "baton/schedule/tied_reduction.h"

#include <numeric>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/validate.h"

namespace baton::schedule {
namespace {

// Union-find over stages; a root is its set's lowest stage.
struct Stages {
  std::vector<int> parent;
  explicit Stages(int n) : parent(static_cast<size_t>(n)) {
    std::iota(parent.begin(), parent.end(), 0);
  }
  int root(int s) {
    while (parent[s] != s) s = parent[s] = parent[parent[s]];
    return s;
  }
  void join(int a, int b) {
    a = root(a), b = root(b);
    if (a != b) parent[std::max(a, b)] = std::min(a, b);
  }
};

}  // namespace

std::vector<int> tie_groups(const Schedule& schedule, const std::vector<std::vector<int>>& tied) {
  const int S = schedule.stages;
  Stages sets(S);
  std::vector<char> grouped(static_cast<size_t>(S), 0);
  for (const auto& copies : tied) {
    for (int s : copies) {
      BATON_CHECK(s >= 0 && s < S, "[schedule.tied] a tied weight names stage ", s,
                  " but schedule \"", printable(schedule.name), "\" has stages 0..", S - 1);
      sets.join(copies.front(), s);
      grouped[s] = 1;
    }
  }
  const Placement placement(schedule);
  for (int s = 0; s < S; ++s) {
    if (placement.ranks_of_stage(s).size() > 1) grouped[s] = 1;
  }
  std::vector<int> group(static_cast<size_t>(S), -1);
  for (int s = 0; s < S; ++s) {
    if (grouped[s]) group[s] = sets.root(s);
  }
  return group;
}

Schedule add_tied_reductions(const Schedule& schedule, const std::vector<std::vector<int>>& tied) {
  BATON_CHECK(!schedule.has_tied_reductions(), "[schedule.tied] schedule \"",
              printable(schedule.name), "\" already has REDUCE_TIED actions");
  validate(schedule);
  const std::vector<int> group = tie_groups(schedule, tied);
  bool any = false;
  for (int g : group) any |= g >= 0;
  if (!any) return schedule;
  BATON_CHECK(!schedule.forward_only, "[schedule.tied] schedule \"", printable(schedule.name),
              "\" is forward-only: it makes no gradients to sum");
  BATON_CHECK(!schedule.carries, "[schedule.tied] schedule \"", printable(schedule.name),
              "\" has no flush between steps, so no point in a step where the copies' gradients "
              "are whole; tied weights and replicated stages need a schedule with a flush");
  const Placement placement(schedule);
  Schedule out = schedule;
  size_t added = 0;
  for (int r = 0; r < schedule.ranks; ++r) {
    for (int s : placement.stages_of_rank(r)) {
      if (group[s] < 0) continue;
      out.actions[r].push_back({ActionKind::REDUCE_TIED, s, group[s]});
      ++added;
    }
  }
  BATON_CHECK(schedule.action_count() + added <= kMaxActions, "[schedule.tied] schedule \"",
              printable(schedule.name), "\" would have more than ", kMaxActions,
              " actions with its tied reductions");
  validate(out);
  return out;
}

}  // namespace baton::schedule
