// Ranks as threads: runs a function once per rank, each thread with its own
// Gloo Communicator over one shared in-memory store on 127.0.0.1. Meant for
// tests of the modules above comm (runtime, parallel, train).
#pragma once

#include <chrono>
#include <functional>

#include "baton/comm/communicator.h"

namespace baton::comm {

// Runs body(communicator) on world_size threads and returns when all have
// finished. If any rank throws, rethrows, after the others finish (they fail
// within `timeout` at the latest), the exception of the lowest rank whose
// error is not a "[comm]" one (a peer's failure seen from a waiting rank),
// else of the lowest rank that threw.
void run_local_group(int world_size, std::chrono::milliseconds timeout,
                     const std::function<void(Communicator&)>& body,
                     TransportKind transport = TransportKind::kAuto);

}  // namespace baton::comm
