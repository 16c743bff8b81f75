// The point-to-point transport interface behind a Communicator. A transport
// moves tensors between this rank and its peers; the Communicator picks one
// per peer (shared memory on the same host, Gloo otherwise) and turns every
// failure into one [comm] line naming the rank, the action and the peer.
//
// Messages are matched by (peer, tag), where tag is an int from c10d_tag(),
// and messages with the same (peer, tag) arrive in the order they were sent.
// In the steady state each tensor costs one message: the receiver expects
// the size it received last time for the same (peer, tag).
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

namespace baton::comm::detail {

using Clock = std::chrono::steady_clock;

// A send in flight. wait() returns once the payload no longer needs the
// sender's tensor (it may still be on its way).
class PendingSend {
 public:
  virtual ~PendingSend() = default;
  // Throws (any exception; the Communicator names it) on a dead peer, and
  // returns false when `deadline` passes first.
  virtual bool wait(Clock::time_point deadline) = 0;
};

// A receive posted early.
class PendingRecv {
 public:
  virtual ~PendingRecv() = default;
  // The received tensor, or an undefined tensor when `deadline` passes
  // first. Throws on a dead peer or a malformed message.
  virtual at::Tensor wait(Clock::time_point deadline) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // "shm" or "gloo".
  virtual const char* name() const = 0;
  // REQUIRES: `tensor` is contiguous, on the transport's device, and not
  // modified until the send's wait() returns.
  virtual std::shared_ptr<PendingSend> isend(const at::Tensor& tensor, int dst, int tag) = 0;
  virtual std::shared_ptr<PendingRecv> irecv(int src, int tag) = 0;

  // Messages this transport has put on its links so far (a shared-memory
  // record, a Gloo send): what a boundary costs, counted by the tests.
  std::uint64_t messages_sent() const { return messages_sent_.load(std::memory_order_relaxed); }

 protected:
  void count_messages(std::uint64_t n) { messages_sent_.fetch_add(n, std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> messages_sent_{0};
};

}  // namespace baton::comm::detail
