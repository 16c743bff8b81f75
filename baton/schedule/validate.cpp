#include "baton/schedule/validate.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "baton/core/error.h"
#include "baton/core/printable.h"
#include "baton/schedule/limits.h"
#include "baton/schedule/text_format.h"
#include "baton/schedule/unroll.h"
#include "baton/schedule/walk.h"

namespace baton::schedule {
namespace {

using Marks = std::vector<std::pair<int, size_t>>;

// A deadlock's message names this many waiting ranks.
constexpr size_t kNamedWaits = 8;

[[noreturn]] void fail(const Schedule& schedule, const std::string& message, const Marks& marks) {
  throw ValidationError(message, marks,
                        "[schedule.validate] " + message + "\n" + format_grid(schedule, marks));
}

std::string where(int stage, int mb) {
  return detail::concat("stage ", stage, " micro-batch ", mb);
}

// Where each (kind, stage, micro-batch) occurs: count and first position.
struct Occurrences {
  int stages, microbatches;
  std::vector<std::vector<int>> count;                     // [kind][s*m+mb]
  std::vector<std::vector<std::pair<int, size_t>>> first;  // [kind][s*m+mb]

  explicit Occurrences(const Schedule& schedule)
      : stages(schedule.stages), microbatches(schedule.microbatches) {
    const size_t cells = static_cast<size_t>(stages) * microbatches;
    count.assign(kActionKindCount, std::vector<int>(cells, 0));
    first.assign(kActionKindCount, std::vector<std::pair<int, size_t>>(cells, {-1, 0}));
    for (int r = 0; r < schedule.ranks; ++r) {
      for (size_t i = 0; i < schedule.actions[r].size(); ++i) {
        const Action& a = schedule.actions[r][i];
        if (is_step_action(a.kind)) continue;  // its number is a bucket, a group or 0
        if (a.skip >= 0) continue;             // a skip's transfer: check_skips
        const size_t k = static_cast<size_t>(a.kind);
        const size_t cell = static_cast<size_t>(a.stage) * microbatches + a.microbatch;
        if (count[k][cell]++ == 0) first[k][cell] = {r, i};
      }
    }
  }
  int n(ActionKind kind, int s, int mb) const {
    return count[static_cast<size_t>(kind)][static_cast<size_t>(s) * microbatches + mb];
  }
  std::pair<int, size_t> at(ActionKind kind, int s, int mb) const {
    return first[static_cast<size_t>(kind)][static_cast<size_t>(s) * microbatches + mb];
  }
};

void check_shape(const Schedule& schedule) {
  BATON_CHECK(schedule.ranks >= 1 && schedule.stages >= 1 && schedule.microbatches >= 1,
              "[schedule.validate] schedule \"", printable(schedule.name),
              "\" needs p, stages and m >= 1 (p=", schedule.ranks, ", stages=", schedule.stages,
              ", m=", schedule.microbatches, ")");
  BATON_CHECK(static_cast<int>(schedule.actions.size()) == schedule.ranks,
              "[schedule.validate] schedule \"", printable(schedule.name), "\" has ",
              schedule.actions.size(), " action lists for p=", schedule.ranks, " ranks");
  for (int r = 0; r < schedule.ranks; ++r) {
    for (size_t i = 0; i < schedule.actions[r].size(); ++i) {
      const Action& a = schedule.actions[r][i];
      if (a.kind == ActionKind::REDUCE_TIED) {
        if (a.stage < 0 || a.stage >= schedule.stages || a.microbatch < 0 ||
            a.microbatch > a.stage) {
          fail(schedule,
               detail::concat("rank ", r, ": ", to_string(a), " is out of range (stages 0..",
                              schedule.stages - 1,
                              "; a tie group is named by its lowest stage, "
                              "so it is at most the stage)"),
               {{r, i}});
        }
        continue;
      }
      if (a.kind == ActionKind::CLIP_NORM) {
        if (a.stage < 0 || a.stage >= schedule.stages || a.microbatch != 0) {
          fail(schedule,
               detail::concat("rank ", r, ": ", to_string(a), " is out of range (stages 0..",
                              schedule.stages - 1, "; a CLIP_NORM's number is 0)"),
               {{r, i}});
        }
        continue;
      }
      if (is_sharding(a.kind)) {
        if (a.stage < 0 || a.stage >= schedule.stages || a.microbatch != 0) {
          fail(schedule,
               detail::concat("rank ", r, ": ", to_string(a), " is out of range (stages 0..",
                              schedule.stages - 1, "; an ", to_string(a.kind), "'s number is 0)"),
               {{r, i}});
        }
        continue;
      }
      if (is_reduction(a.kind)) {
        if (a.stage < 0 || a.stage >= schedule.stages || a.microbatch < 0 ||
            a.microbatch >= kMaxMicrobatches) {
          fail(schedule,
               detail::concat("rank ", r, ": ", to_string(a), " is out of range (stages 0..",
                              schedule.stages - 1, ", buckets 0..", kMaxMicrobatches - 1, ")"),
               {{r, i}});
        }
        continue;
      }
      if (a.stage < 0 || a.stage >= schedule.stages || a.microbatch < 0 ||
          a.microbatch >= schedule.microbatches) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " is out of range (stages 0..",
                            schedule.stages - 1, ", micro-batches 0..", schedule.microbatches - 1,
                            ")"),
             {{r, i}});
      }
      if (a.skip >= 0) {
        const bool known = a.skip < static_cast<int>(schedule.skips.size());
        const bool producer = a.kind == ActionKind::SEND_F || a.kind == ActionKind::RECV_B;
        if (!known ||
            a.stage != (producer ? schedule.skips[a.skip].from : schedule.skips[a.skip].to)) {
          fail(schedule,
               known ? detail::concat("rank ", r, ": ", to_string(a), " names skip ", a.skip,
                                      " (\"", printable(schedule.skips[a.skip].name), "\", stage ",
                                      schedule.skips[a.skip].from, " to stage ",
                                      schedule.skips[a.skip].to,
                                      ") but its stage is neither end's "
                                      "(SEND_F and RECV_B name the stashing stage, RECV_F and "
                                      "SEND_B the popping one)")
                     : detail::concat("rank ", r, ": ", to_string(a), " names skip ", a.skip,
                                      schedule.skips.empty()
                                          ? std::string(" but the schedule declares no skips")
                                          : detail::concat(" but only skips 0..",
                                                           schedule.skips.size() - 1, " exist")),
               {{r, i}});
        }
        continue;
      }
      if ((a.kind == ActionKind::RECV_F && a.stage == 0) ||
          (a.kind == ActionKind::SEND_F && a.stage == schedule.stages - 1) ||
          (a.kind == ActionKind::SEND_B && a.stage == 0) ||
          (a.kind == ActionKind::RECV_B && a.stage == schedule.stages - 1)) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " has no peer stage (stages 0..",
                            schedule.stages - 1, ")"),
             {{r, i}});
      }
    }
  }
}

// The skip table, and each skip's transfers: exactly one of each where its
// two stages of a micro-batch are on different ranks, none where they share one.
void check_skips(const Schedule& schedule, const Placement& placement) {
  const int n = static_cast<int>(schedule.skips.size());
  if (n == 0) return;
  // Bounded by the stages, so that the (skip, micro-batch) tables stay near
  // the (stage, micro-batch) ones.
  const int limit = std::min(kMaxSkips, std::max(64, 4 * schedule.stages));
  if (n > limit) {
    fail(schedule,
         detail::concat(n, " skip connections, more than the limit of ", limit,
                        " (64, or 4 per stage)"),
         {});
  }
  for (int k = 0; k < n; ++k) {
    const Skip& skip = schedule.skips[k];
    if (skip.name.empty() || skip.from < 0 || skip.to <= skip.from || skip.to >= schedule.stages) {
      fail(schedule,
           detail::concat("skip ", k, " (\"", printable(skip.name), "\") goes from stage ",
                          skip.from, " to stage ", skip.to,
                          "; a skip has a name and goes forward between two stages in 0..",
                          schedule.stages - 1),
           {});
    }
    for (int j = 0; j < k; ++j) {
      if (schedule.skips[j].name == skip.name)
        fail(schedule,
             detail::concat("skips ", j, " and ", k, " are both named \"", printable(skip.name),
                            "\""),
             {});
    }
  }
  // The skip transfers present, by (kind, skip, micro-batch): count and first position.
  struct Seen {
    int count = 0;
    std::pair<int, size_t> first{-1, 0};
  };
  std::map<std::tuple<ActionKind, int, int>, Seen> present;
  for (int r = 0; r < schedule.ranks; ++r) {
    for (size_t i = 0; i < schedule.actions[r].size(); ++i) {
      const Action& a = schedule.actions[r][i];
      if (a.skip < 0) continue;
      Seen& seen = present[{a.kind, a.skip, a.microbatch}];
      if (seen.count++ == 0) seen.first = {r, i};
    }
  }
  if (!schedule.has_communication()) return;  // compute only: lower() adds them
  for (int k = 0; k < n; ++k) {
    const Skip& skip = schedule.skips[k];
    for (int mb = 0; mb < schedule.microbatches; ++mb) {
      const int producer = placement.rank_of(skip.from, mb),
                consumer = placement.rank_of(skip.to, mb);
      struct Edge {
        ActionKind kind;
        int stage, rank;
      };
      const Edge edges[] = {{ActionKind::SEND_F, skip.from, producer},
                            {ActionKind::RECV_F, skip.to, consumer},
                            {ActionKind::SEND_B, skip.to, consumer},
                            {ActionKind::RECV_B, skip.from, producer}};
      for (const Edge& e : edges) {
        const auto found = present.find({e.kind, k, mb});
        const int seen = found == present.end() ? 0 : found->second.count;
        const auto pos =
            found == present.end() ? std::pair<int, size_t>{-1, 0} : found->second.first;
        const Action action{e.kind, e.stage, mb, k};
        const bool backward = e.kind == ActionKind::SEND_B || e.kind == ActionKind::RECV_B;
        const int expected = producer != consumer && !(schedule.forward_only && backward) ? 1 : 0;
        if (seen != expected) {
          fail(schedule,
               detail::concat("skip ", k, " (\"", printable(skip.name), "\") of micro-batch ", mb,
                              " goes from rank ", producer, " to rank ", consumer, ": rank ",
                              e.rank, " needs ", expected == 1 ? "exactly one " : "no ",
                              to_string(action), ", found ", seen),
               pos.first >= 0 ? Marks{pos} : Marks{});
        }
        if (seen == 1 && pos.first != e.rank) {
          fail(schedule,
               detail::concat(to_string(action), " is on rank ", pos.first, " but ",
                              where(e.stage, mb), " runs on rank ", e.rank),
               {pos});
        }
      }
    }
  }
}

void check_completeness(const Schedule& schedule, const Occurrences& seen) {
  for (int s = 0; s < schedule.stages; ++s) {
    for (int mb = 0; mb < schedule.microbatches; ++mb) {
      const int f = seen.n(ActionKind::F, s, mb), b = seen.n(ActionKind::B, s, mb);
      const int i = seen.n(ActionKind::I, s, mb), w = seen.n(ActionKind::W, s, mb);
      const bool whole = b == 1 && i == 0 && w == 0;
      const bool split = b == 0 && i == 1 && w == 1;
      const bool none = b == 0 && i == 0 && w == 0;
      if (f == 1 && (schedule.forward_only ? none : whole || split)) continue;
      Marks marks;
      for (ActionKind k : {ActionKind::F, ActionKind::B, ActionKind::I, ActionKind::W})
        if (seen.n(k, s, mb) > 0) marks.push_back(seen.at(k, s, mb));
      if (f != 1) {
        fail(schedule, detail::concat(where(s, mb), " has ", f, " F actions; it needs exactly one"),
             marks);
      }
      if (schedule.forward_only && !none) {
        fail(schedule,
             detail::concat(where(s, mb), " has ", b, " B, ", i, " I and ", w,
                            " W actions; a forward-only schedule has none"),
             marks);
      }
      if (!schedule.forward_only && !whole && !split) {
        fail(schedule,
             detail::concat(where(s, mb), " has ", b, " B, ", i, " I and ", w,
                            " W actions; it needs one B, or one I and one W"),
             marks);
      }
    }
  }
}

// Each (stage, micro-batch) computes on one rank (Placement's precondition).
void check_one_rank_per_cell(const Schedule& schedule) {
  const size_t cells = static_cast<size_t>(schedule.stages) * schedule.microbatches;
  std::vector<std::pair<int, size_t>> owner(cells, {-1, 0});
  for (int r = 0; r < schedule.ranks; ++r) {
    for (size_t i = 0; i < schedule.actions[r].size(); ++i) {
      const Action& a = schedule.actions[r][i];
      if (!is_compute(a.kind)) continue;
      auto& first = owner[static_cast<size_t>(a.stage) * schedule.microbatches + a.microbatch];
      if (first.first >= 0 && first.first != r) {
        fail(
            schedule,
            detail::concat(where(a.stage, a.microbatch), " has compute on rank ", first.first, " (",
                           to_string(schedule.actions[first.first][first.second]), ") and rank ", r,
                           " (", to_string(a), "); each (stage, micro-batch) runs on one rank"),
            {first, {r, i}});
      }
      if (first.first < 0) first = {r, i};
    }
  }
}

// Lowered schedules: SEND/RECV exactly where consecutive stages change rank.
void check_communication(const Schedule& schedule, const Placement& placement,
                         const Occurrences& seen) {
  const bool lowered = schedule.has_communication();
  for (int s = 0; s + 1 < schedule.stages; ++s) {
    for (int mb = 0; mb < schedule.microbatches; ++mb) {
      const int here = placement.rank_of(s, mb), there = placement.rank_of(s + 1, mb);
      const bool crosses = here != there;
      struct Edge {
        ActionKind kind;
        int stage;
        int rank;
      };
      const Edge edges[] = {{ActionKind::SEND_F, s, here},
                            {ActionKind::RECV_F, s + 1, there},
                            {ActionKind::SEND_B, s + 1, there},
                            {ActionKind::RECV_B, s, here}};
      for (const Edge& e : edges) {
        const int n = seen.n(e.kind, e.stage, mb);
        const Action action{e.kind, e.stage, mb};
        const bool backward = e.kind == ActionKind::SEND_B || e.kind == ActionKind::RECV_B;
        if (schedule.forward_only && backward) {
          if (n > 0) {
            fail(schedule,
                 detail::concat(to_string(action),
                                ": a forward-only schedule has no backward communication"),
                 {seen.at(e.kind, e.stage, mb)});
          }
          continue;
        }
        if (!lowered || (!crosses && n == 0)) continue;
        if (!crosses) {
          fail(schedule,
               detail::concat(to_string(action), ": stages ", s, " and ", s + 1, " of micro-batch ",
                              mb, " are both on rank ", here,
                              ", so they exchange tensors directly; remove the communication"),
               {seen.at(e.kind, e.stage, mb)});
        }
        if (n != 1) {
          // With none to point at, point at the compute that should send or receive.
          const bool forward = e.kind == ActionKind::SEND_F || e.kind == ActionKind::RECV_F;
          const ActionKind compute = forward                              ? ActionKind::F
                                     : seen.n(ActionKind::B, e.stage, mb) ? ActionKind::B
                                                                          : ActionKind::I;
          fail(schedule,
               detail::concat(where(s, mb), " runs on rank ", here, " and stage ", s + 1,
                              " on rank ", there, ": rank ", e.rank, " needs exactly one ",
                              to_string(action), ", found ", n),
               {n ? seen.at(e.kind, e.stage, mb) : seen.at(compute, e.stage, mb)});
        }
        const auto pos = seen.at(e.kind, e.stage, mb);
        if (pos.first != e.rank) {
          fail(schedule,
               detail::concat(to_string(action), " is on rank ", pos.first, " but stage ", e.stage,
                              " of micro-batch ", mb, " runs on rank ", e.rank),
               {pos});
        }
      }
    }
  }
}

// REDUCE_GRAD: on a rank holding its stage, after that stage's last backward
// there (B or W: what makes weight gradients), each bucket once; and if any
// stage is reduced, every stage on every rank, in buckets 0..n-1 with the
// same n wherever the stage is held.
void check_grad_reductions(const Schedule& schedule) {
  if (!schedule.has_grad_reductions()) return;
  struct Reduced {
    std::map<int, size_t> buckets;  // bucket -> index in the rank's list
  };
  std::map<int, int> bucket_count;                     // stage -> n, from its first holder
  std::map<int, std::pair<int, size_t>> first_holder;  // stage -> a REDUCE_GRAD of it
  // The kind of the schedule's first gradient reduction: the others match it.
  ActionKind first_kind = ActionKind::REDUCE_GRAD;
  for (const auto& list : schedule.actions) {
    const auto found = std::find_if(list.begin(), list.end(),
                                    [](const Action& a) { return is_grad_reduction(a.kind); });
    if (found != list.end()) {
      first_kind = found->kind;
      break;
    }
  }
  for (int r = 0; r < schedule.ranks; ++r) {
    const auto& list = schedule.actions[r];
    std::map<int, size_t> last_backward;  // stage -> index of its last B or W here
    std::map<int, Reduced> reduced;       // stage -> its reductions here
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (is_compute(a.kind)) {
        reduced.emplace(a.stage, Reduced{});
        if (is_weight_backward(a.kind)) last_backward[a.stage] = i;
      }
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_grad_reduction(a.kind)) continue;
      if (a.kind != first_kind) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " and ", to_string(first_kind),
                            " in one schedule; a schedule reduces its gradients by all-reduce "
                            "(REDUCE_GRAD) or by reduce-scatter (REDUCE_SCATTER, ZeRO-2/3), not "
                            "both"),
             {{r, i}});
      }
      const auto held = reduced.find(a.stage);
      if (held == reduced.end()) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " reduces the gradients of stage ",
                            a.stage, ", which rank ", r, " does not compute"),
             {{r, i}});
      }
      const auto last = last_backward.find(a.stage);
      if (last != last_backward.end() && last->second > i) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " comes before ",
                            to_string(list[last->second]),
                            "; a stage's gradient reduction "
                            "must follow its last backward (B or W) on the rank"),
             {{r, i}, {r, last->second}});
      }
      const auto [at, inserted] = held->second.buckets.emplace(a.microbatch, i);
      if (!inserted) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a),
                            " appears twice; each bucket of a stage is reduced once"),
             {{r, at->second}, {r, i}});
      }
    }
    for (const auto& [stage, seen] : reduced) {
      const int n = static_cast<int>(seen.buckets.size());
      if (n == 0) {
        Marks marks;
        const auto last = last_backward.find(stage);
        if (last != last_backward.end()) marks.push_back({r, last->second});
        fail(schedule,
             detail::concat("rank ", r, " computes stage ", stage,
                            " but reduces none of its gradients; once a schedule has "
                            "REDUCE_GRAD, every stage on every rank needs its buckets reduced"),
             marks);
      }
      if (seen.buckets.rbegin()->first != n - 1) {
        fail(schedule,
             detail::concat("rank ", r, " reduces ", n, " buckets of stage ", stage,
                            " but names bucket ", seen.buckets.rbegin()->first,
                            "; buckets are numbered 0..", n - 1),
             {{r, seen.buckets.rbegin()->second}});
      }
      const auto [known, first] = bucket_count.emplace(stage, n);
      if (first) {
        first_holder[stage] = {r, seen.buckets.begin()->second};
      } else if (known->second != n) {
        fail(schedule,
             detail::concat("stage ", stage, " is reduced in ", known->second, " buckets on rank ",
                            first_holder[stage].first, " but in ", n, " on rank ", r,
                            "; every holder of a stage reduces the same buckets"),
             {first_holder[stage], {r, seen.buckets.begin()->second}});
      }
    }
  }
}

// UNSHARD and RESHARD (ZeRO, sharding.h): a rank may act only on stages it
// computes. Once a schedule has UNSHARD, every (rank, stage it computes) has
// exactly one, before the stage's first compute there; once it has RESHARD,
// every one has exactly one too, after the stage's last compute there. So no
// F, B, I or W of a stage runs while it is resharded. (Both are rank-local in
// the pipeline, a collective over the stage's dp replicas, which run the same
// list: they add no wait between pipeline ranks, so no deadlock.)
void check_sharding(const Schedule& schedule) {
  if (!schedule.has_sharding()) return;
  bool any_reshard = false;
  for (const auto& list : schedule.actions)
    for (const Action& a : list) any_reshard |= a.kind == ActionKind::RESHARD;
  for (int r = 0; r < schedule.ranks; ++r) {
    const auto& list = schedule.actions[r];
    std::map<int, std::pair<size_t, size_t>> computes;  // stage -> first, last compute here
    for (size_t i = 0; i < list.size(); ++i) {
      if (!is_compute(list[i].kind)) continue;
      auto [it, fresh] = computes.emplace(list[i].stage, std::make_pair(i, i));
      if (!fresh) it->second.second = i;
    }
    std::map<int, size_t> unshard, reshard;  // stage -> its index
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_sharding(a.kind)) continue;
      const auto held = computes.find(a.stage);
      if (held == computes.end()) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " acts on stage ", a.stage,
                            ", which rank ", r, " does not compute"),
             {{r, i}});
      }
      auto& seen = a.kind == ActionKind::UNSHARD ? unshard : reshard;
      const auto [at, inserted] = seen.emplace(a.stage, i);
      if (!inserted) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a),
                            " appears twice; a stage is unsharded and resharded once per step"),
             {{r, at->second}, {r, i}});
      }
      if (a.kind == ActionKind::UNSHARD && i > held->second.first) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " comes after ",
                            to_string(list[held->second.first]),
                            "; a stage's parameters are gathered before its first compute"),
             {{r, i}, {r, held->second.first}});
      }
      if (a.kind == ActionKind::RESHARD && i < held->second.second) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " comes before ",
                            to_string(list[held->second.second]),
                            "; a stage's parameters are freed only after its last compute"),
             {{r, i}, {r, held->second.second}});
      }
    }
    for (const auto& [stage, span] : computes) {
      if (!unshard.count(stage)) {
        fail(schedule,
             detail::concat("rank ", r, " computes stage ", stage,
                            " without an UNSHARD of it; once a schedule has UNSHARD, every stage "
                            "on every rank gathers its parameters"),
             {{r, span.first}});
      }
      if (any_reshard && !reshard.count(stage)) {
        fail(schedule,
             detail::concat("rank ", r, " computes stage ", stage,
                            " without a RESHARD of it; once a schedule has RESHARD, every stage "
                            "on every rank frees its gathered parameters"),
             {{r, span.second}});
      }
    }
  }
}

// REDUCE_TIED: on a rank that computes its stage, once per (rank, stage),
// after every compute, point-to-point action and REDUCE_GRAD of the rank
// (before its CLIP_NORM: check_clip_norm puts that last) (its
// sum waits for the other copies, so nothing the others need may follow it),
// and every REDUCE_TIED of one stage names the same group.
void check_tied_reductions(const Schedule& schedule) {
  if (!schedule.has_tied_reductions()) return;
  std::map<int, std::pair<int, std::pair<int, size_t>>> group_of;  // stage -> (group, where)
  for (int r = 0; r < schedule.ranks; ++r) {
    const auto& list = schedule.actions[r];
    std::map<int, size_t> computes;  // stage -> index of a compute action here
    // One past the last action that is neither a REDUCE_TIED nor the CLIP_NORM after them.
    size_t last_other = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (is_compute(list[i].kind)) computes.emplace(list[i].stage, i);
      if (list[i].kind != ActionKind::REDUCE_TIED && list[i].kind != ActionKind::CLIP_NORM)
        last_other = i + 1;
    }
    std::map<int, size_t> seen;  // stage -> its REDUCE_TIED here
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (a.kind != ActionKind::REDUCE_TIED) continue;
      if (computes.count(a.stage) == 0) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " sums the tied gradients of stage ",
                            a.stage, ", which rank ", r, " does not compute"),
             {{r, i}});
      }
      if (i < last_other) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a), " comes before ",
                            to_string(list[last_other - 1]),
                            "; a REDUCE_TIED waits for the "
                            "other copies, so it must follow all of its rank's other actions"),
             {{r, i}, {r, last_other - 1}});
      }
      const auto [at, first] = seen.emplace(a.stage, i);
      if (!first) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a),
                            " appears twice; a rank sums a stage's tied copies once"),
             {{r, at->second}, {r, i}});
      }
      const auto [known, new_stage] =
          group_of.emplace(a.stage, std::make_pair(a.microbatch, std::make_pair(r, i)));
      if (!new_stage && known->second.first != a.microbatch) {
        fail(schedule,
             detail::concat("stage ", a.stage, " is in tie group ", known->second.first,
                            " on rank ", known->second.second.first, " but in group ", a.microbatch,
                            " on rank ", r, "; every copy of a stage belongs to one group"),
             {known->second.second, {r, i}});
      }
    }
  }
}

// CLIP_NORM: none, or one on every rank, as its last action (its all-reduce
// waits for every rank's whole gradients), named by the lowest stage the rank
// computes (0 when it computes none).
void check_clip_norm(const Schedule& schedule) {
  if (!schedule.has_clip_norm()) return;
  for (int r = 0; r < schedule.ranks; ++r) {
    const auto& list = schedule.actions[r];
    int lowest = -1;
    long clip = -1;
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (is_compute(a.kind) && (lowest < 0 || a.stage < lowest)) lowest = a.stage;
      if (a.kind != ActionKind::CLIP_NORM) continue;
      if (clip >= 0) {
        fail(schedule,
             detail::concat("rank ", r, ": ", to_string(a),
                            " appears twice; a rank clips its gradients once per step"),
             {{r, static_cast<size_t>(clip)}, {r, i}});
      }
      clip = static_cast<long>(i);
    }
    if (clip < 0) {
      fail(schedule,
           detail::concat("rank ", r,
                          " has no CLIP_NORM but other ranks do; the norm is a sum over "
                          "every rank, so every rank ends its step with one"),
           {});
    }
    const auto at = static_cast<size_t>(clip);
    if (at + 1 != list.size()) {
      fail(schedule,
           detail::concat("rank ", r, ": ", to_string(list[at]), " comes before ",
                          to_string(list.back()),
                          "; the norm needs the rank's whole gradients, so CLIP_NORM is its "
                          "rank's last action"),
           {{r, at}, {r, list.size() - 1}});
    }
    const int expected = lowest < 0 ? 0 : lowest;  // stage 0 on a rank that computes nothing
    if (list[at].stage != expected) {
      fail(schedule,
           detail::concat("rank ", r, ": ", to_string(list[at]), " names stage ", list[at].stage,
                          " but the lowest stage rank ", r, " computes is ", expected),
           {{r, at}});
    }
  }
}

// "rank 0: stage 1 micro-batch 0 runs F before stage 0's F (1F0 needs 0F0
// first)": `a` on rank r needs `needs`, which r runs later. A stage placed on
// several ranks is named as such, since which copy a micro-batch uses is easy
// to miss in the file.
std::string order_error(int r, const Action& a, const Action& needs, const Placement& placement) {
  const bool same_stage = needs.stage == a.stage;
  std::string message = detail::concat(
      "rank ", r, ": ", where(a.stage, a.microbatch), " runs ", to_string(a.kind), " before ",
      same_stage ? "" : detail::concat("stage ", needs.stage, "'s "), to_string(needs.kind), " (",
      to_string(a), " needs ", to_string(needs), " first");
  const std::vector<int> holders = placement.ranks_of_stage(needs.stage);
  if (holders.size() > 1) {
    std::string ranks;
    for (size_t i = 0; i < holders.size(); ++i) {
      ranks += (i == 0                    ? ""
                : i + 1 == holders.size() ? " and "
                                          : ", ") +
               std::to_string(holders[i]);
    }
    message +=
        detail::concat(", later on rank ", r, "; stage ", needs.stage, " is placed on ranks ",
                       ranks, ", micro-batch ", needs.microbatch, " on rank ", r);
  }
  return message + ")";
}

}  // namespace

void validate(const Schedule& schedule) {
  check_shape(schedule);
  const Occurrences seen(schedule);
  check_completeness(schedule, seen);
  check_one_rank_per_cell(schedule);
  const Placement placement(schedule);
  check_communication(schedule, placement, seen);
  check_skips(schedule, placement);
  check_grad_reductions(schedule);
  check_sharding(schedule);
  check_tied_reductions(schedule);
  check_clip_norm(schedule);
  if (schedule.forward_only && schedule.has_clip_norm())
    fail(schedule, "a forward-only schedule makes no gradients to clip (it has a CLIP_NORM)", {});
  if (schedule.carries) {
    // No flush: prove the order over consecutive steps. Three steps and the
    // drain hold every pairing of a step's carried actions with the next's.
    if (schedule.has_grad_reductions() || schedule.has_tied_reductions() ||
        schedule.has_clip_norm() || schedule.has_sharding() || schedule.forward_only) {
      fail(schedule,
           "a schedule without a flush (carries) has no REDUCE_GRAD, REDUCE_SCATTER, REDUCE_TIED, "
           "CLIP_NORM, UNSHARD or RESHARD and is not forward-only",
           {});
    }
    validate(unroll(schedule, 3));
    return;
  }

  const WalkResult walked = walk(schedule, placement);
  if (walked.complete) return;
  // A rank stuck on an action of its own can never proceed: an order error.
  for (int r = 0; r < schedule.ranks; ++r) {
    if (walked.next[r] == schedule.actions[r].size()) continue;
    const Wait& wait = walked.waits[r];
    if (wait.rank != r) continue;
    const Action& a = schedule.actions[r][walked.next[r]];
    Marks marks{{r, walked.next[r]}};
    const auto later = seen.at(wait.needs.kind, wait.needs.stage, wait.needs.microbatch);
    if (later.first >= 0) marks.push_back(later);
    fail(schedule, order_error(r, a, wait.needs, placement), marks);
  }
  // The first line names a few waiting ranks; the grid marks them all.
  std::string cycle;
  Marks marks;
  for (int r = 0; r < schedule.ranks; ++r) {
    if (walked.next[r] == schedule.actions[r].size()) continue;
    const Action& a = schedule.actions[r][walked.next[r]];
    if (marks.size() < kNamedWaits) {
      cycle +=
          detail::concat(cycle.empty() ? "" : "; ", "rank ", r, " waits at ", to_string(a), " for ",
                         to_string(walked.waits[r].needs), " on rank ", walked.waits[r].rank);
    }
    marks.push_back({r, walked.next[r]});
  }
  if (marks.size() > kNamedWaits)
    cycle += detail::concat("; ", marks.size() - kNamedWaits, " more ranks wait");
  fail(schedule, "deadlock: " + cycle, marks);
}

}  // namespace baton::schedule
