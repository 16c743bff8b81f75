// Point-to-point through shared memory, for peers on this host.
//
// Each rank owns an inbox (shm_inbox.h) with one ring per source. A message
// is a record in the ring: the tensor header, then either the payload itself
// (small tensors, copied in by the sender and out by the receiver) or, for
// large tensors, the payload's address in the sender, which the receiver
// copies across once with process_vm_readv (cross-memory attach). Where CMA
// is refused (ptrace restrictions), large payloads go over Gloo instead.
//
// No thread is started: a receiver drains its rings whenever it waits, spins
// briefly while the machine has a core to spare (spin_policy.h), then sleeps
// on its inbox's futex doorbell, checking every 10 ms that the peer is alive. A sender never waits
// for a small message; a large one completes when the receiver has copied it.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "baton/comm/c10d_compat.h"
#include "baton/comm/transport.h"

namespace baton::comm::detail {

struct ShmOptions {
  std::uint64_t ring_bytes = 1 << 20;      // per source; env BATON_SHM_RING_KB
  std::uint64_t inline_bytes = 256 << 10;  // larger payloads go by CMA
  std::chrono::microseconds spin{1000};    // the most a wait spins; env BATON_SHM_SPIN_US
  bool remote_copy = true;                 // CMA where allowed; env BATON_SHM_CMA=0 turns it off
  // Reads BATON_SHM_RING_KB, BATON_SHM_SPIN_US and BATON_SHM_CMA; throws on
  // bad values.
  static ShmOptions from_env();
};

// Sets up the inboxes of this rank and of its same-host peers
// (`peers[r]` true), through `store` under `prefix`. Every rank of the group
// calls it, also those without same-host peers. `gloo` carries payloads where
// CMA is refused and must outlive the transport.
std::unique_ptr<Transport> make_shm_transport(c10d::Store& store, const std::string& prefix,
                                              int rank, int world_size,
                                              const std::vector<bool>& peers,
                                              compat::BackendPtr gloo,
                                              std::chrono::milliseconds timeout,
                                              const ShmOptions& options);

}  // namespace baton::comm::detail
