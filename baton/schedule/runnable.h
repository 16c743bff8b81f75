// The runnable schedule: generated or loaded from a file, lowered, with its
// gradient reductions, validated. `baton simulate`, `baton train`'s checks
// before ranks start and baton::Pipeline all build it here, so for the same
// inputs they run the same schedule and refuse the same files.
//
// It is built in two steps, because callers size the reductions from the
// lowered schedule (the simulator's buckets follow its stage chunks, the
// runtime's follow the parameters of the stages it builds for it, and tied
// weights need the partition into its stages):
//
//   Schedule s = lowered_schedule(source);            // generate or load, lower
//   s = add_reductions(s, ReductionOptions{}.set_dp(2));  // REDUCE_GRAD, REDUCE_TIED
//
// runnable(source, reductions) does both at once.
//
// Reductions a schedule already carries (a file's) follow one rule:
//  - REDUCE_GRAD: a schedule with any keeps them, at every dp, and gets none
//    added. Loading validated them complete (every stage on every rank that
//    computes it, buckets 0..n-1 after its last backward there, the same n on
//    every holder), which is all a dp group needs; with dp = 1 they reduce
//    nothing (PyTorch's CSVs carry them at any dp). Their bucket counts stand:
//    `buckets_per_stage` sizes added reductions only, and the simulator's cost
//    model and the executor each check a schedule's counts against their own
//    buckets. With dp > 1 and overlap_grad_reduce off they move to the end of
//    their rank's list, as added ones do. A schedule without any gets
//    add_grad_reductions()'s when dp > 1.
//  - REDUCE_TIED: a schedule with any keeps them and gets none added; one
//    without gets add_tied_reductions(tied)'s.
//  - UNSHARD, RESHARD (ZeRO): a schedule with any keeps them; with dp > 1
//    its REDUCE_GRADs become REDUCE_SCATTERs for zero >= 2 (add_sharding).
//  - CLIP_NORM: a schedule with any keeps them (they stand where
//    add_clip_norm() puts them); one without gets add_clip_norm()'s when
//    `clip` is on. A file's CLIP_NORMs with clipping off measure the norm and
//    scale nothing.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "baton/schedule/generator.h"
#include "baton/schedule/schedule.h"

namespace baton::schedule {

// Where a schedule comes from: a generator of schedule_names() with its
// options, or a file (baton's text form, or PyTorch's CSV when the name ends
// in ".csv"; load_schedule_file) when `file` is set.
struct ScheduleSource {
  std::string generator = "1f1b";
  GeneratorOptions options;
  std::string file;

  static ScheduleSource generated(std::string name, GeneratorOptions options) {
    ScheduleSource s;
    s.generator = std::move(name);
    s.options = options;
    return s;
  }
  static ScheduleSource from_file(std::string path) {
    ScheduleSource s;
    s.file = std::move(path);
    return s;
  }
  bool is_file() const { return !file.empty(); }
};

// The reductions a run adds to a lowered schedule (see the rule above).
struct ReductionOptions {
  int dp = 1;  // replicas of the pipeline
  // Gradient buckets of each stage, one count per stage; empty: one each.
  std::vector<int> buckets_per_stage;
  // Off: every REDUCE_GRAD at the end of its rank's list (defer_grad_reductions).
  bool overlap_grad_reduce = true;
  // Sets of stages holding copies of one tied weight (tie_groups).
  std::vector<std::vector<int>> tied;
  // Global-norm gradient clipping: a CLIP_NORM ends every rank's list.
  bool clip = false;
  // ZeRO stage 0-3 (sharding.h): with dp > 1, add_sharding()'s UNSHARD,
  // RESHARD and REDUCE_SCATTER actions.
  int zero = 0;
  // Off: each UNSHARD right before its stage's first compute (add_sharding).
  bool prefetch_unshard = true;

  ReductionOptions& set_dp(int d) {
    dp = d;
    return *this;
  }
  ReductionOptions& set_buckets_per_stage(std::vector<int> b) {
    buckets_per_stage = std::move(b);
    return *this;
  }
  ReductionOptions& set_overlap_grad_reduce(bool o) {
    overlap_grad_reduce = o;
    return *this;
  }
  ReductionOptions& set_tied(std::vector<std::vector<int>> t) {
    tied = std::move(t);
    return *this;
  }
  ReductionOptions& set_clip(bool c) {
    clip = c;
    return *this;
  }
  ReductionOptions& set_zero(int z) {
    zero = z;
    return *this;
  }
  ReductionOptions& set_prefetch_unshard(bool p) {
    prefetch_unshard = p;
    return *this;
  }
};

// The generator's schedule, lowered; or the file's, lowered when it holds
// compute actions (and reductions) only, and validated. Throws baton::Error:
// generate()'s errors, or for a file one naming its path (missing, malformed,
// invalid).
Schedule lowered_schedule(const ScheduleSource& source);

// `lowered` with its reductions by the rule above: add_grad_reductions() when
// dp > 1 and it has no REDUCE_GRAD, defer_grad_reductions() when dp > 1 and
// overlap is off, add_sharding(zero) when dp > 1, add_tied_reductions() when it has no REDUCE_TIED,
// add_clip_norm() when `clip` is on and it has no CLIP_NORM. The result is
// validated. Throws those passes' errors (dp < 1, bad bucket counts, dp > 1,
// tied stages or clipping with a schedule without a flush, too many actions).
Schedule add_reductions(const Schedule& lowered, const ReductionOptions& options);

// add_reductions(lowered_schedule(source), options).
Schedule runnable(const ScheduleSource& source, const ReductionOptions& options);

}  // namespace baton::schedule
