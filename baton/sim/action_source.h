// Action sources: a schedule's per-rank action lists read one action at a
// time, so that the stats-only simulator (stream_stats.h) can run schedules
// far larger than memory would hold as a Schedule. Closed-form schedules
// (1f1b, gpipe, interleaved) compute the k-th action of a rank from (p, m, v)
// and hold nothing; any other schedule is read from a materialized Schedule.
#pragma once

#include <memory>
#include <string>

#include "baton/schedule/generator.h"
#include "baton/schedule/schedule.h"

namespace baton::sim {

class ActionSource {
 public:
  virtual ~ActionSource() = default;

  const std::string& name() const { return name_; }
  int ranks() const { return ranks_; }
  int stages() const { return stages_; }
  int microbatches() const { return microbatches_; }
  schedule::StageMap map() const { return map_; }
  // Stage chunks per rank, as Schedule::stages_per_rank().
  int stages_per_rank() const;

  // Compute actions (F, B, I, W) of `rank`, and the index-th of them.
  // REQUIRES: 0 <= rank < ranks(), index < size(rank).
  virtual size_t size(int rank) const = 0;
  // Writes actions [from, from + count) of `rank` to `out`.
  virtual void read(int rank, size_t from, size_t count, schedule::Action* out) const = 0;
  // The rank that runs (stage, microbatch).
  virtual int rank_of(int stage, int microbatch) const = 0;
  // True when rank_of() does not depend on the micro-batch (known without
  // asking it stages x m times).
  virtual bool placed_by_stage() const { return false; }

  // Compute actions over all ranks, and the actions of the lowered schedule
  // (every (stage, micro-batch) boundary between ranks adds SEND and RECV both
  // ways), which is what `baton simulate --json` reports as "actions".
  size_t compute_action_count() const;
  size_t lowered_action_count() const;

 protected:
  std::string name_;
  int ranks_ = 0, stages_ = 0, microbatches_ = 0;
  schedule::StageMap map_ = schedule::StageMap::Loop;
};

// Whether `name` has a closed form (no Schedule is built for it).
bool has_closed_form(const std::string& name);

// The closed-form source of a generator, with the generator's own argument
// checks and messages. REQUIRES: has_closed_form(name). Throws baton::Error
// for an undefined (p, m, v) as generate() would; refuses more than
// kMaxStreamCells (stage, micro-batch) pairs (the simulator's tables).
std::unique_ptr<ActionSource> closed_form_source(const std::string& name,
                                                 const schedule::GeneratorOptions& options);

// Reads a compute-only or lowered Schedule (its compute actions); the source
// refers to `schedule`, which must outlive it. Throws baton::Error for a
// schedule without a flush (Schedule::carries): sim::simulate() runs those.
std::unique_ptr<ActionSource> schedule_source(const schedule::Schedule& schedule);

// The stats-only simulator keeps two times per (stage, micro-batch): 64 Mi of
// them is 1 GiB.
inline constexpr size_t kMaxStreamCells = size_t{64} << 20;

}  // namespace baton::sim
