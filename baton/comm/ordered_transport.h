// Point-to-point over a payload channel that matches messages by their order
// between two ranks, not by tag, and whose receiver must know a payload's size
// before posting it: NCCL's send and recv. This is the NCCL communicator's
// protocol without the NCCL calls (nccl_cuda.cpp holds those), so that tests
// run it on the CPU over an in-process channel.
//
// Each tensor's header goes first, with its tag, over a CPU control channel:
// the transports of a CPU communicator (shared memory on this host, Gloo to
// other hosts), on one control tag per peer, which keeps the send order. The
// receiver posts payload receives in the order the headers arrive and files
// them under (peer, tag) until a wait takes them.
//
// Receives are posted eagerly, as the shm transport drains its rings: every
// isend, irecv and wait first reads the headers that have arrived from peers
// on this host and posts their receives. So a rank that sends before it waits
// still takes its peers' payloads in, and ranks that all send large tensors
// before waiting do not wait on each other. Gloo cannot be polled (a timed-out
// Gloo wait closes its pairs): a peer on another host has its headers read
// while this rank waits for one of its messages, and the next control receive
// from it stays posted, so that its headers land meanwhile.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "baton/comm/c10d_compat.h"
#include "baton/comm/communicator.h"
#include "baton/comm/transport.h"

namespace baton::comm::detail {

// One payload transfer in flight on an OrderedChannel.
class ChannelOp {
 public:
  virtual ~ChannelOp() = default;
  // True once the transfer needs no further call on this rank: it is done, or
  // the device completes it in stream order (NCCL). Never blocks; throws when
  // the transfer failed.
  virtual bool settled() = 0;
  // Finishes a settled transfer for the caller (NCCL: the current stream waits
  // for it). False when `deadline` passes first; throws on failure.
  virtual bool finish(Clock::time_point deadline) = 0;
};

// Payloads between this rank and its peers, matched by order in each direction.
class OrderedChannel {
 public:
  virtual ~OrderedChannel() = default;
  // Starts sending `tensor` (contiguous, on the channel's device) to `dst`.
  virtual std::shared_ptr<ChannelOp> send(const at::Tensor& tensor, int dst) = 0;
  // Starts receiving the next payload from `src` into `tensor`, which has
  // that payload's dtype and size.
  virtual std::shared_ptr<ChannelOp> recv(const at::Tensor& tensor, int src) = 0;
};

// A communicator whose point-to-point tensors go over `channel`, their headers
// over `control`'s transports, and whose collectives go over `collectives`
// (NCCL on the GPU); tensors live on `device`. Groups (new_group) reduce over
// `control`'s Gloo. `name` names the backend and the transport ("nccl").
// REQUIRES: `control` is a world communicator; every rank passes the same kinds.
Communicator connect_ordered(const Communicator& control, compat::BackendPtr collectives,
                             std::shared_ptr<OrderedChannel> channel, at::Device device,
                             const std::string& name);

}  // namespace baton::comm::detail
