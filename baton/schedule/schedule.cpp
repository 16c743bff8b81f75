#include "baton/schedule/schedule.h"

#include <algorithm>
#include <set>

#include "baton/core/error.h"
#include "baton/core/printable.h"

namespace baton::schedule {

std::string_view to_string(StageMap map) {
  switch (map) {
    case StageMap::Loop:
      return "loop";
    case StageMap::V:
      return "v";
    case StageMap::Bidirectional:
      return "bidirectional";
    case StageMap::Custom:
      return "custom";
  }
  return "custom";
}

StageMap parse_stage_map(std::string_view text) {
  if (text == "loop") return StageMap::Loop;
  if (text == "v") return StageMap::V;
  if (text == "bidirectional" || text == "chimera") return StageMap::Bidirectional;
  if (text == "custom") return StageMap::Custom;
  BATON_CHECK(false, "[schedule.map] unknown stage-to-rank map \"", printable(text),
              "\" (expected loop, v, bidirectional or custom)");
  return StageMap::Custom;
}

int Schedule::stages_per_rank() const {
  if (map == StageMap::Bidirectional) return 2;
  return ranks > 0 ? std::max(1, stages / ranks) : 1;
}

bool Schedule::has_communication() const {
  for (const auto& list : actions)
    for (const auto& a : list)
      if (is_communication(a.kind)) return true;
  return false;
}

bool Schedule::has_grad_reductions() const {
  for (const auto& list : actions)
    for (const auto& a : list)
      if (is_grad_reduction(a.kind)) return true;
  return false;
}

bool Schedule::has_sharding() const {
  for (const auto& list : actions)
    for (const auto& a : list)
      if (is_sharding(a.kind)) return true;
  return false;
}

bool Schedule::has_tied_reductions() const {
  for (const auto& list : actions)
    for (const auto& a : list)
      if (a.kind == ActionKind::REDUCE_TIED) return true;
  return false;
}

bool Schedule::has_clip_norm() const {
  for (const auto& list : actions)
    for (const auto& a : list)
      if (a.kind == ActionKind::CLIP_NORM) return true;
  return false;
}

bool Schedule::splits_backward() const {
  for (const auto& list : actions)
    for (const auto& a : list)
      if (a.kind == ActionKind::I || a.kind == ActionKind::W) return true;
  return false;
}

size_t Schedule::action_count() const {
  size_t n = 0;
  for (const auto& list : actions) n += list.size();
  return n;
}

Placement::Placement(const Schedule& schedule)
    : stages_(schedule.stages),
      microbatches_(schedule.microbatches),
      owner_(static_cast<size_t>(schedule.stages) * schedule.microbatches, -1) {
  for (int r = 0; r < static_cast<int>(schedule.actions.size()); ++r) {
    for (const Action& a : schedule.actions[r]) {
      if (!is_compute(a.kind)) continue;
      BATON_ASSERT(
          a.stage >= 0 && a.stage < stages_ && a.microbatch >= 0 && a.microbatch < microbatches_,
          "action ", to_string(a), " out of range");
      int& owner = owner_[static_cast<size_t>(a.stage) * microbatches_ + a.microbatch];
      BATON_CHECK(owner == -1 || owner == r, "[schedule.placement] stage ", a.stage,
                  " micro-batch ", a.microbatch, " has compute on rank ", owner, " and rank ", r,
                  " (", to_string(a), "); each (stage, micro-batch) runs on one rank");
      owner = r;
    }
  }
}

std::vector<int> Placement::ranks_of_stage(int stage) const {
  std::set<int> ranks;
  for (int mb = 0; mb < microbatches_; ++mb) {
    const int r = rank_of(stage, mb);
    if (r >= 0) ranks.insert(r);
  }
  return {ranks.begin(), ranks.end()};
}

std::vector<int> Placement::stages_of_rank(int rank) const {
  std::vector<int> out;
  for (int s = 0; s < stages_; ++s) {
    for (int mb = 0; mb < microbatches_; ++mb) {
      if (rank_of(s, mb) == rank) {
        out.push_back(s);
        break;
      }
    }
  }
  return out;
}

int rank_for_stage(StageMap map, int ranks, int stage) {
  switch (map) {
    case StageMap::Loop:
      return stage % ranks;
    case StageMap::V:
      return stage < ranks ? stage : 2 * ranks - 1 - stage;
    case StageMap::Bidirectional:
      return stage;  // the down pipe
    case StageMap::Custom:
      break;
  }
  BATON_ASSERT(false, "rank_for_stage needs a named map");
  return -1;
}

StageMap detect_stage_map(const Schedule& schedule, const Placement& placement) {
  const int p = schedule.ranks;
  const int S = schedule.stages;
  auto all_match = [&](auto&& rank_for) {
    for (int s = 0; s < S; ++s)
      for (int mb = 0; mb < schedule.microbatches; ++mb) {
        const int r = placement.rank_of(s, mb);
        if (r >= 0 && r != rank_for(s, mb)) return false;
      }
    return true;
  };
  if (p > 0 && S % p == 0 && all_match([&](int s, int) { return s % p; })) return StageMap::Loop;
  if (S == 2 * p && all_match([&](int s, int) { return rank_for_stage(StageMap::V, p, s); }))
    return StageMap::V;
  if (S == p) {
    bool bidirectional = true;
    for (int mb = 0; mb < schedule.microbatches && bidirectional; ++mb) {
      bool down = true, up = true;
      for (int s = 0; s < S; ++s) {
        const int r = placement.rank_of(s, mb);
        if (r < 0) continue;
        down = down && r == s;
        up = up && r == p - 1 - s;
      }
      bidirectional = down || up;
    }
    if (bidirectional) return StageMap::Bidirectional;
  }
  return StageMap::Custom;
}

}  // namespace baton::schedule
