// Which ranks share this host's memory. Two ranks may use shared memory when
// they run under one kernel boot and share the mount, IPC, PID and network
// namespaces: two network namespaces on one machine count as two hosts, so a
// test can exercise the cross-host path on one machine.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <string>
#include <vector>

namespace baton::comm::detail {

// "<boot id>|<mnt ns>|<ipc ns>|<pid ns>|<net ns>" of this process.
std::string host_identity();

// Publishes this rank's identity under `prefix` and returns, for every rank,
// whether it is on this rank's host (true for the rank itself).
std::vector<bool> same_host_ranks(c10d::Store& store, const std::string& prefix, int rank,
                                  int world_size);

}  // namespace baton::comm::detail
