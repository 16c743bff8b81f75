// Measures what a point-to-point message costs between this job's ranks, so
// the simulator can charge communication as the runtime pays it
// (`baton train --compare-sim`).
#pragma once

#include "baton/comm/communicator.h"

namespace baton::comm {

struct P2pCost {
  double latency_ms = 0;    // one-way time of a 64-byte tensor
  double bytes_per_ms = 0;  // bandwidth beyond the latency, from 1 MiB tensors
};

// Collective: every rank calls it. Ranks 2k and 2k+1, then 2k+1 and 2k+2,
// ping-pong `rounds` times per size; the medians are averaged over the pairs
// and returned on every rank. With one rank, returns zeros.
P2pCost measure_p2p_cost(Communicator& comm, int rounds = 20);

// A ring all-reduce's cost over `group` (sim/cost_model.h's formula): the
// latency of one of its 2 (d - 1) steps, from all-reduces of 64 bytes, and
// the bandwidth that makes `bytes` take what they took, from all-reduces of
// that many bytes (at least 64 KiB). Medians of `rounds`; collective over the
// group, the same result on every member. A group of one: zeros.
struct AllReduceCost {
  double step_latency_ms = 0;
  double bytes_per_ms = 0;
};
AllReduceCost measure_allreduce_cost(Communicator& group, double bytes, int rounds = 5);

}  // namespace baton::comm
