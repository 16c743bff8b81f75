// Bringing every rank's measured events (and per-stage activation bytes) to
// every rank, over the communicator's all-reduce, so rank 0 can draw the
// whole pipeline's timeline. Events are put on one time axis, from the
// earliest rank's step start, by each rank's `start_ms` on the steady clock,
// which ranks of one host share (across hosts the offsets are meaningless).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/trace/timeline.h"

namespace baton::train {

// Collective: every rank of `comm` calls it.
trace::Timeline gather_timeline(comm::Communicator& comm, const std::vector<trace::Event>& events,
                                double start_ms, int rank, int world_size,
                                const std::string& title);

// Collective: per-stage values, each known on the ranks holding the stage
// (replicas average).
std::map<int, double> gather_stage_bytes(comm::Communicator& comm,
                                         const std::map<int, double>& local, int stages);

}  // namespace baton::train
