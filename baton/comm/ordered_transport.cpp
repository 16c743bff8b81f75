#include "baton/comm/ordered_transport.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "baton/comm/comm_state.h"
#include "baton/comm/tensor_header.h"
#include "baton/core/error.h"

namespace baton::comm::detail {
namespace {

using ::baton::detail::concat;

// The control tag: above every c10d_tag() value (which fit in 31 bits).
constexpr int kControlTag = (1 << 30) + 7;
// How long a wait blocks on one peer's headers before it polls the others
// again: above the shm transport's 10 ms liveness check, so a dead peer is
// still named at once.
constexpr auto kSlice = std::chrono::milliseconds(50);
// The pause between polls while a payload has not settled.
constexpr auto kPause = std::chrono::microseconds(100);
// A deadline that has passed: a wait on it only takes what has arrived.
constexpr auto kPoll = Clock::time_point::min();

// A control message: [tag, the header's words].
at::Tensor encode_control(const at::Tensor& tensor, int tag) {
  const TensorHeader header = encode_header(tensor);
  at::Tensor words = at::empty({kHeaderWords + 1}, at::kLong);
  words.data_ptr<std::int64_t>()[0] = tag;
  std::memcpy(words.data_ptr<std::int64_t>() + 1, header.words.data(), kHeaderBytes);
  return words;
}

struct Arrival {
  at::Tensor tensor;
  std::shared_ptr<ChannelOp> op;
};

class OrderedTransport;

class OrderedSend : public PendingSend {
 public:
  explicit OrderedSend(OrderedTransport* transport) : transport_(transport) {}
  bool wait(Clock::time_point deadline) override;

  std::shared_ptr<PendingSend> control;
  std::shared_ptr<ChannelOp> payload;
  at::Tensor tensor;  // alive until the payload is finished

 private:
  OrderedTransport* transport_;
};

class OrderedRecv : public PendingRecv {
 public:
  OrderedRecv(OrderedTransport* transport, int src, int tag)
      : transport_(transport), src_(src), tag_(tag) {}
  at::Tensor wait(Clock::time_point deadline) override;

 private:
  OrderedTransport* transport_;
  int src_, tag_;
};

class OrderedTransport : public Transport {
 public:
  OrderedTransport(std::shared_ptr<CommState> control, std::shared_ptr<OrderedChannel> channel,
                   at::Device device, std::string name)
      : control_(std::move(control)),
        channel_(std::move(channel)),
        device_(device),
        name_(std::move(name)),
        pollable_(static_cast<size_t>(control_->world_size), false),
        control_recvs_(static_cast<size_t>(control_->world_size)) {
    for (int r = 0; r < control_->world_size; ++r) {
      const Transport* peer = control_->p2p[r];
      pollable_[r] = peer != nullptr && std::string(peer->name()) == "shm";
    }
  }

  const char* name() const override { return name_.c_str(); }

  std::shared_ptr<PendingSend> isend(const at::Tensor& tensor, int dst, int tag) override {
    auto send = std::make_shared<OrderedSend>(this);
    std::lock_guard<std::mutex> lock(mutex_);
    drain_locked();
    send->control = control_->p2p[dst]->isend(encode_control(tensor, tag), dst, kControlTag);
    send->payload = channel_->send(tensor, dst);
    count_messages(1);  // the payload (its control message counts in the control transport)
    send->tensor = tensor;
    return send;
  }

  std::shared_ptr<PendingRecv> irecv(int src, int tag) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!control_recvs_[src]) control_recvs_[src] = control_->p2p[src]->irecv(src, kControlTag);
    drain_locked();
    return std::make_shared<OrderedRecv>(this, src, tag);
  }

  // Reads headers until the one for (src, tag) has its receive posted, then
  // waits for that payload: the tensor, or undefined at the deadline.
  at::Tensor await(int src, int tag, Clock::time_point deadline) {
    Arrival arrival;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (;;) {
        drain_locked();
        if (take_locked(src, tag, &arrival)) break;
        const auto now = Clock::now();
        if (now >= deadline) return at::Tensor();
        read_locked(src, pollable_[src] ? std::min(deadline, now + kSlice) : deadline);
      }
    }
    if (!settle(*arrival.op, deadline) || !arrival.op->finish(deadline)) return at::Tensor();
    return arrival.tensor;
  }

  bool finish_send(OrderedSend& send, Clock::time_point deadline) {
    if (!send.control->wait(deadline)) return false;
    if (!settle(*send.payload, deadline) || !send.payload->finish(deadline)) return false;
    send.tensor = at::Tensor();
    return true;
  }

 private:
  // Polls the headers until `op` settles: its peer may need this rank's
  // receives to finish it.
  bool settle(ChannelOp& op, Clock::time_point deadline) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        drain_locked();
      }
      if (op.settled()) return true;
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(kPause);
    }
  }

  // Posts the receives of every header that has arrived from a peer on this host.
  void drain_locked() {
    for (int r = 0; r < control_->world_size; ++r) {
      if (!pollable_[r]) continue;
      while (read_locked(r, kPoll)) {
      }
    }
  }

  // Reads the next header from `src` and posts its receive; false when none
  // arrives by `deadline`. The next control receive from `src` stays posted.
  bool read_locked(int src, Clock::time_point deadline) {
    auto& pending = control_recvs_[src];
    if (!pending) pending = control_->p2p[src]->irecv(src, kControlTag);
    const at::Tensor words = pending->wait(deadline);
    if (!words.defined()) return false;
    pending = control_->p2p[src]->irecv(src, kControlTag);
    const std::string from = concat("rank ", src);
    BATON_CHECK(words.scalar_type() == at::kLong && words.numel() == kHeaderWords + 1, "[comm.",
                name_, "] control message from ", from, " holds ", words.numel(), " ",
                words.scalar_type(), " values, not ", kHeaderWords + 1, " int64 (tag collision?)");
    TensorHeader header;
    std::memcpy(header.words.data(), words.data_ptr<std::int64_t>() + 1, kHeaderBytes);
    check_header(header, from);
    Arrival arrival{allocate_from_header(header, device_), nullptr};
    arrival.op = channel_->recv(arrival.tensor, src);
    const int tag = static_cast<int>(words.data_ptr<std::int64_t>()[0]);
    arrived_[{src, tag}].push_back(std::move(arrival));
    return true;
  }

  bool take_locked(int src, int tag, Arrival* out) {
    auto it = arrived_.find({src, tag});
    if (it == arrived_.end()) return false;
    *out = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) arrived_.erase(it);
    return true;
  }

  std::shared_ptr<CommState> control_;
  std::shared_ptr<OrderedChannel> channel_;
  const at::Device device_;
  const std::string name_;
  std::vector<bool> pollable_;  // peers on this host: shared memory, polled at every call
  std::mutex mutex_;            // the control receives, the arrivals, the order of posting
  std::vector<std::shared_ptr<PendingRecv>> control_recvs_;  // per peer: its next header
  std::map<std::pair<int, int>, std::deque<Arrival>> arrived_;
};

bool OrderedSend::wait(Clock::time_point deadline) {
  return transport_->finish_send(*this, deadline);
}

at::Tensor OrderedRecv::wait(Clock::time_point deadline) {
  return transport_->await(src_, tag_, deadline);
}

}  // namespace

Communicator connect_ordered(const Communicator& control, compat::BackendPtr collectives,
                             std::shared_ptr<OrderedChannel> channel, at::Device device,
                             const std::string& name) {
  const std::shared_ptr<CommState>& cpu = control.state();
  BATON_ASSERT(cpu->members.empty(), "connect_ordered needs a world communicator, got the ",
               cpu->group_name);
  auto state = std::make_shared<CommState>(std::move(collectives), cpu->store, cpu->rank,
                                           cpu->world_size, cpu->timeout, device, name);
  state->gloo_device = cpu->gloo_device;  // groups reduce over Gloo
  state->transports.push_back(
      std::make_unique<OrderedTransport>(cpu, std::move(channel), device, name));
  for (int r = 0; r < cpu->world_size; ++r) {
    if (r != cpu->rank) state->p2p[r] = state->transports.back().get();
  }
  return Communicator(std::move(state));
}

}  // namespace baton::comm::detail
