// Communicator: point-to-point tensors between pipeline stages and the few
// collectives baton needs, over a c10d backend (Gloo on CPU, NCCL on GPU).
//
// Every tensor travels with a small header (dtype, ndim, shape), so a
// receiver never states shapes. Point-to-point goes through shared memory to
// ranks on this host and through Gloo (TCP) to others (TransportKind); in the
// steady state each tensor is one message (see gloo_transport.h and
// shm_transport.h). Every wait has a timeout; a timeout or a peer
// that dies produces one baton::Error line naming this rank, the action that
// waited and the peer, e.g.
//   [comm] rank 1 timed out after 5 s waiting for stage 2 micro-batch 3 RECV_F from rank 0
//   [comm] rank 1: peer rank 0 closed the connection while waiting for ...
// After such an error the communicator is broken (as Gloo and NCCL are after a
// timeout): every later call throws at once, naming the first failure.
//
// Thread safety: one thread issues the calls of one Communicator; handles may
// be waited on from any thread. Ranks of a test may be threads of one process,
// each with its own Communicator over one shared store (see from_store).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <torch/types.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "baton/comm/tag.h"
#include "baton/core/choices.h"

namespace baton::comm {

inline constexpr std::chrono::milliseconds kDefaultTimeout{300'000};

// How point-to-point tensors reach a peer (core/choices.h; "on this host"
// is host_identity.h's).
using ::baton::parse_transport;
using ::baton::to_string;
using ::baton::TransportKind;

namespace detail {
struct CommState;
struct SendState;
struct RecvState;
struct ReduceState;
struct GatherState;
}  // namespace detail

// A send in flight. wait() returns once the transport no longer needs the
// tensor. In the steady state (the receiver expects this size) that is at
// once for tensors up to 256 KiB over shared memory, and when the receiver's
// posted receive has taken it over Gloo; a larger tensor over shared memory,
// or the first message of a tag over Gloo, completes only once the receiver
// is in some wait(), as it is bound to be in any valid schedule.
// Destroying a handle without waiting leaves the send in flight.
class SendHandle {
 public:
  SendHandle() = default;
  // `what` names the action for error messages without the waiting rank,
  // e.g. "stage 2 micro-batch 3 SEND_F to rank 3". Throws baton::Error on
  // timeout or a dead peer. REQUIRES: valid(), and wait() not called before.
  void wait(const std::string& what);
  bool valid() const { return state_ != nullptr; }

 private:
  friend class Communicator;
  std::shared_ptr<detail::SendState> state_;
};

// A receive posted early. wait() returns the received tensor, allocated on
// the communicator's device with the sender's dtype and shape.
class RecvHandle {
 public:
  RecvHandle() = default;
  RecvHandle(RecvHandle&&) noexcept = default;
  RecvHandle& operator=(RecvHandle&&) noexcept = default;
  RecvHandle(const RecvHandle&) = delete;
  RecvHandle& operator=(const RecvHandle&) = delete;
  // `what` as for SendHandle::wait, e.g. "stage 3 micro-batch 3 RECV_F from
  // rank 2". REQUIRES: valid(), and wait() not called before.
  torch::Tensor wait(const std::string& what);
  // The same, but the text is made only if the wait fails: a pipeline
  // receives every micro-batch's tensors, and formatting what each receive
  // is cost about 0.7 µs of the 4 µs a received message took to take.
  torch::Tensor wait_described(const std::function<std::string()>& describe);
  bool valid() const { return state_ != nullptr; }

 private:
  friend class Communicator;
  std::shared_ptr<detail::RecvState> state_;
};

// An all-reduce in flight (Communicator::all_reduce_sum_async). wait()
// writes the sums into the tensors it was given. Destroying a handle without
// waiting leaves the collective running; its tensors then keep their values.
class ReduceHandle {
 public:
  ReduceHandle() = default;
  // Blocks until the sums are in place; throws baton::Error on timeout or a
  // dead peer, naming what was reduced and the group.
  // REQUIRES: valid(), and wait() not called before.
  void wait();
  bool valid() const { return state_ != nullptr; }
  // When the collective finished (not when wait() returned): what the
  // executor records as the end of a REDUCE_GRAD, to tell the reduction time
  // hidden behind compute from the time waited for. REQUIRES: wait() has
  // returned.
  std::chrono::steady_clock::time_point finished_at() const;

 private:
  friend class Communicator;
  std::shared_ptr<detail::ReduceState> state_;
};

// An all-gather in flight (Communicator::all_gather_async). wait() returns
// every rank's tensor, in rank order, on the communicator's device.
class GatherHandle {
 public:
  GatherHandle() = default;
  // Throws baton::Error on timeout or a dead peer, naming what was gathered.
  // REQUIRES: valid(), and wait() not called before.
  std::vector<torch::Tensor> wait();
  bool valid() const { return state_ != nullptr; }

 private:
  friend class Communicator;
  std::shared_ptr<detail::GatherState> state_;
};

class Communicator {
 public:
  // Made by connect(), from_store() or connect_nccl(); not for direct use.
  explicit Communicator(std::shared_ptr<detail::CommState> state);
  Communicator(Communicator&&) noexcept = default;
  Communicator& operator=(Communicator&&) noexcept = default;
  ~Communicator();

  int rank() const;
  int world_size() const;
  std::chrono::milliseconds timeout() const;
  // "gloo", "nccl", or "solo" for a communicator of one rank (rank_layout.h).
  std::string backend_name() const;

  // Starts sending `tensor` (any dtype, any shape up to 13 dimensions; made
  // contiguous and detached) to rank `dst`. The handle keeps the tensor alive.
  // Several messages with the same (dst, tag) may be in flight (overlapping
  // steps send step k+1's before the receiver took step k's); they arrive in
  // the order they were sent. REQUIRES: dst != rank().
  SendHandle isend(const torch::Tensor& tensor, int dst, const Tag& tag);

  // Posts the receive of the tensor that rank `src` sends with `tag`; it
  // never blocks. Receives may be waited on in any order, except that
  // receives with the same (src, tag) take that tag's messages in the order
  // they were sent, the first posted the first message.
  RecvHandle irecv(int src, const Tag& tag);

  // "shm", "gloo" or "nccl": how point-to-point reaches `peer`.
  std::string transport_name(int peer) const;
  // Point-to-point messages this rank's transports have sent so far (a
  // tensor is one in the steady state; see isend): for tests and benchmarks.
  std::uint64_t p2p_messages_sent() const;

  // Sums each tensor in place across all ranks (every rank passes tensors of
  // the same dtypes and shapes, in the same order). Blocks until done. Up to
  // 64 KiB per dtype among ranks of one host, through shared memory and rank
  // 0 (which adds in rank order); otherwise Gloo's (or NCCL's) all-reduce.
  void all_reduce_sum(std::vector<torch::Tensor>& tensors,
                      const std::string& what = "all_reduce_sum");

  // Starts the same sum without blocking: Gloo (or NCCL) reduces on its own
  // threads while this thread goes on; the handle's wait() copies the sums in.
  // The tensors must not change until then. Sums that would go through shared
  // memory (above) are small and run here, at once.
  ReduceHandle all_reduce_sum_async(std::vector<torch::Tensor> tensors,
                                    const std::string& what = "all_reduce_sum");

  // Starts summing `input` (flat; every rank passes one of the same dtype and
  // size, world_size() times `output`'s) over the ranks, of which this rank
  // keeps the rank()-th 1/world_size(): wait() writes it into `output`.
  // Gloo's reduce-scatter under LibTorch 2.x, (n - 1) / n of the input each
  // way, half an all-reduce's traffic; where Gloo has none (LibTorch 1.13)
  // and for sums small enough to go through shared memory (above), an
  // all-reduce of the whole whose part is kept (exact, an all-reduce's
  // traffic). Throws baton::Error for sizes that do not match.
  ReduceHandle reduce_scatter_sum_async(const torch::Tensor& input, torch::Tensor output,
                                        const std::string& what = "reduce_scatter");
  // Whether reduce_scatter_sum_async runs a reduce-scatter for large sums
  // (LibTorch 2.x's Gloo), not an all-reduce whose part it keeps.
  bool has_reduce_scatter() const;

  // Starts gathering every rank's `tensor` (each passes one of the same
  // dtype and shape) to every rank: c10d's all-gather (Gloo's, or NCCL's),
  // (n - 1) / n of the tensor's bytes per rank each way, half an all-reduce's
  // traffic. A communicator of one rank returns its own tensor.
  GatherHandle all_gather_async(const torch::Tensor& tensor,
                                const std::string& what = "all_gather");

  // A communicator for collectives among `members` (world ranks, ascending,
  // this rank among them), e.g. a dp group from topology::Topology::dp_group.
  // Only the members take part: creating it and every collective on it block
  // on them alone. It reduces over Gloo on the CPU whatever this
  // communicator's backend (tensors elsewhere are copied through the CPU),
  // carries no point-to-point (isend and irecv throw), and has this
  // communicator's timeout; rank() is the index in `members`, and its errors
  // name this rank's world rank and `kind` with the members, e.g. "[comm] rank
  // 2 timed out after 5 s waiting for ... (over the dp group of ranks 0, 2)".
  // Collective over the members, and every rank must create its groups in the
  // same order (the n-th group a rank makes shares a store prefix with the
  // n-th its fellow members make). Throws baton::Error for bad members or when
  // a member does not join within the timeout.
  // REQUIRES: this is a world communicator (not itself a group).
  Communicator new_group(const std::vector<int>& members, const std::string& kind);

  // Returns once every rank has called barrier().
  void barrier(const std::string& what = "barrier");

  // For baton/comm's own factories (NCCL builds on a Gloo communicator).
  const std::shared_ptr<detail::CommState>& state() const { return state_; }

 private:
  bool small_on_one_host(const torch::Tensor& flat) const;
  torch::Tensor reduce_through_rank0(const torch::Tensor& flat, const std::string& what);

  std::shared_ptr<detail::CommState> state_;
};

struct ConnectOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Nonzero: torchrun 2.x's agent hosts a store on master_addr at this port
  // (RankEnv::agent_store_port). LibTorch 2.x builds then make every rank a
  // client of it, so that no second port has to be free; 1.13 builds, which
  // cannot speak to it, ignore it and use master_port.
  int agent_store_port = 0;
  // Bounds every wait, and the rendezvous of the ranks at creation.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  TransportKind transport = TransportKind::kAuto;

  ConnectOptions& set_rank(int v) {
    rank = v;
    return *this;
  }
  ConnectOptions& set_world_size(int v) {
    world_size = v;
    return *this;
  }
  ConnectOptions& set_master_addr(std::string v) {
    master_addr = std::move(v);
    return *this;
  }
  ConnectOptions& set_master_port(int v) {
    master_port = v;
    return *this;
  }
  ConnectOptions& set_agent_store_port(int v) {
    agent_store_port = v;
    return *this;
  }
  ConnectOptions& set_timeout(std::chrono::milliseconds v) {
    timeout = v;
    return *this;
  }
  ConnectOptions& set_transport(TransportKind v) {
    transport = v;
    return *this;
  }
};

// Joins a Gloo process group: rank 0 hosts a c10d TCPStore on master_port,
// the others connect to master_addr:master_port. Throws baton::Error when a
// rank does not show up within the timeout. Ranks on one host bind Gloo to
// 127.0.0.1; otherwise to GLOO_SOCKET_IFNAME when set, else the hostname.
Communicator connect(const ConnectOptions& options);

// Joins a Gloo process group on 127.0.0.1 over a store the caller made
// (tests run ranks as threads over one make_hash_store()).
Communicator from_store(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                        std::chrono::milliseconds timeout = kDefaultTimeout,
                        TransportKind transport = TransportKind::kAuto);

// An in-memory store shared by ranks that are threads of one process.
c10::intrusive_ptr<c10d::Store> make_hash_store();

}  // namespace baton::comm
