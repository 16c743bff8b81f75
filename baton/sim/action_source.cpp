#include "baton/sim/action_source.h"

#include <algorithm>

#include "baton/core/error.h"
#include "baton/schedule/generator.h"
#include "baton/schedule/limits.h"

namespace baton::sim {

using schedule::Action;
using schedule::ActionKind;

int ActionSource::stages_per_rank() const {
  if (map_ == schedule::StageMap::Bidirectional) return 2;
  return ranks_ > 0 ? std::max(1, stages_ / ranks_) : 1;
}

size_t ActionSource::compute_action_count() const {
  size_t n = 0;
  for (int r = 0; r < ranks_; ++r) n += size(r);
  return n;
}

size_t ActionSource::lowered_action_count() const {
  size_t crossings = 0;
  for (int s = 0; s + 1 < stages_; ++s) {
    if (placed_by_stage()) {
      crossings += rank_of(s, 0) != rank_of(s + 1, 0) ? microbatches_ : 0;
      continue;
    }
    for (int mb = 0; mb < microbatches_; ++mb) crossings += rank_of(s, mb) != rank_of(s + 1, mb);
  }
  return compute_action_count() + 4 * crossings;
}

namespace {

// Warm-up forwards, then one forward and one backward alternately, then the
// remaining backwards: 1f1b, gpipe (all forwards warm up) and interleaved
// (forwards and backwards over chunk-micro-batches k = 0 .. total - 1).
class WarmupSteadyDrain : public ActionSource {
 public:
  WarmupSteadyDrain(std::string name, schedule::ClosedForm form,
                    const schedule::GeneratorOptions& o, int v, int group)
      : form_(form), v_(v), group_(group), total_(o.microbatches * v) {
    name_ = std::move(name);
    ranks_ = o.ranks;
    stages_ = o.ranks * v;
    microbatches_ = o.microbatches;
  }

  size_t size(int) const override { return 2 * static_cast<size_t>(total_); }
  int rank_of(int stage, int) const override { return stage % ranks_; }
  bool placed_by_stage() const override { return true; }

  void read(int rank, size_t from, size_t count, Action* out) const override {
    const long w = warmup(rank), steady_end = w + 2 * (total_ - w);
    for (size_t i = 0; i < count; ++i) {
      const long k = static_cast<long>(from + i);
      if (k < w) {
        out[i] = forward(rank, k);
      } else if (k < steady_end) {
        const long j = k - w;
        out[i] = j % 2 == 0 ? forward(rank, w + j / 2) : backward(rank, j / 2);
      } else {
        out[i] = backward(rank, (total_ - w) + (k - steady_end));
      }
    }
  }

 private:
  long warmup(int r) const {
    if (form_ == schedule::ClosedForm::kAllForwards) return total_;
    if (form_ == schedule::ClosedForm::kOneFOneB) return std::min(ranks_ - r - 1, microbatches_);
    return microbatches_ == ranks_
               ? total_
               : std::min<long>(total_, (ranks_ - r - 1) * 2 + (v_ - 1) * group_);
  }
  // Chunk-micro-batch k: micro-batch (k / round) * g + k % g, chunk (k % round) / g.
  Action forward(int r, long k) const {
    if (v_ == 1) return {ActionKind::F, r, static_cast<int>(k)};
    const long round = static_cast<long>(group_) * v_;
    return {ActionKind::F, static_cast<int>((k % round) / group_) * ranks_ + r,
            static_cast<int>((k / round) * group_ + k % group_)};
  }
  Action backward(int r, long k) const {
    if (v_ == 1) return {ActionKind::B, r, static_cast<int>(k)};
    const long round = static_cast<long>(group_) * v_;
    return {ActionKind::B, (v_ - 1 - static_cast<int>((k % round) / group_)) * ranks_ + r,
            static_cast<int>((k / round) * group_ + k % group_)};
  }

  schedule::ClosedForm form_;
  int v_, group_;
  long total_;
};

class FromSchedule : public ActionSource {
 public:
  explicit FromSchedule(const schedule::Schedule& s) : schedule_(s), placement_(s) {
    name_ = s.name;
    ranks_ = s.ranks;
    stages_ = s.stages;
    microbatches_ = s.microbatches;
    map_ = s.map;
    compute_.resize(s.ranks);
    for (int r = 0; r < s.ranks; ++r)
      for (const Action& a : s.actions[r])
        if (!schedule::is_communication(a.kind)) compute_[r].push_back(a);
  }
  size_t size(int rank) const override { return compute_[rank].size(); }
  void read(int rank, size_t from, size_t count, Action* out) const override {
    std::copy_n(compute_[rank].begin() + from, count, out);
  }
  int rank_of(int stage, int mb) const override { return placement_.rank_of(stage, mb); }

 private:
  const schedule::Schedule& schedule_;
  schedule::Placement placement_;
  std::vector<std::vector<Action>> compute_;
};

}  // namespace

bool has_closed_form(const std::string& name) {
  return schedule::closed_form_of(name) != schedule::ClosedForm::kNone;
}

std::unique_ptr<ActionSource> closed_form_source(const std::string& name,
                                                 const schedule::GeneratorOptions& options) {
  BATON_ASSERT(has_closed_form(name), "no closed form for schedule ", name);
  namespace d = schedule::detail;
  d::check_options(name.c_str(), options, 1, {d::kAnyVirtualStages});
  int v = 1, group = 1;
  const int p = options.ranks, m = options.microbatches;
  const schedule::ClosedForm form = schedule::closed_form_of(name);
  if (form == schedule::ClosedForm::kInterleaved) {
    // The checks and messages of schedule/interleaved.cpp.
    BATON_CHECK(options.virtual_stages != 1,
                "[schedule.interleaved] --virtual 1 is plain 1F1B (use schedule 1f1b); "
                "interleaved needs at least 2 stage chunks per rank");
    v = d::check_options("interleaved", options, 2, {d::kAnyVirtualStages});
    const int rounds = std::max(1, m / p);
    BATON_CHECK(m % rounds == 0, "[schedule.interleaved] micro-batches m=", m, " with pp=", p,
                ": interleaved 1F1B runs micro-batches in equal groups of at least p (Megatron: "
                "groups of p), and ",
                m, " does not split into ", m, " / ", p, " = ", rounds,
                " equal groups; use a multiple of pp (try m=", (m / p + 1) * p, ") or of ", rounds);
    group = m / rounds;
  } else {
    d::check_options(name.c_str(), options, 1);
  }
  const size_t cells = static_cast<size_t>(p) * v * m;
  BATON_CHECK(cells <= kMaxStreamCells, "[sim.stream] ", name, " with pp=", p, ", m=", m, " and ",
              p * v, " stages has ", cells,
              " (stage, micro-batch) pairs, more than the simulator's limit of ", kMaxStreamCells);
  return std::make_unique<WarmupSteadyDrain>(name, form, options, v, group);
}

std::unique_ptr<ActionSource> schedule_source(const schedule::Schedule& schedule) {
  BATON_CHECK(!schedule.carries, "[sim.stats] schedule \"", schedule.name,
              "\" has no flush between steps; the stats-only simulator runs one flushed step, "
              "sim::simulate() unrolls it");
  return std::make_unique<FromSchedule>(schedule);
}

}  // namespace baton::sim
