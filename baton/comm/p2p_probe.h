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

}  // namespace baton::comm
