// Bringing every rank's measured events (and per-stage activation bytes) to
// every rank, over the communicator's all-reduce, so rank 0 can draw the
// whole pipeline's timeline. Times stay as each rank measured them, from its
// own step start; ranks of one host share the clock.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/trace/timeline.h"

namespace baton::train {

// Collective: every rank calls it. comm may be null for a single rank.
trace::Timeline gather_timeline(comm::Communicator* comm, const std::vector<trace::Event>& events,
                                int rank, int world_size, const std::string& title);

// Collective: per-stage values, each known on the ranks holding the stage
// (replicas average).
std::map<int, double> gather_stage_bytes(comm::Communicator* comm,
                                         const std::map<int, double>& local, int stages);

}  // namespace baton::train
