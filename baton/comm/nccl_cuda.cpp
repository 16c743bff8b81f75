// NCCL-backed communicators; built only against a CUDA LibTorch. Untested in
// baton's CPU CI: it compiles only where CUDA is present.
//
// Point-to-point: NCCL matches messages by order, not tag, and a receiver
// must know a payload's size before posting it. So every tensor's header
// goes first over a CPU control channel (a Gloo group over the same store,
// through shared memory on one host), on one tag per peer, which keeps the
// send order. A receiver's waits read those headers in that order and post
// each one's NCCL receive as they read it (not as it arrives: see await).
// Headers are built from sizes on the host: no device sync.
#include "baton/comm/nccl.h"

#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "baton/comm/comm_state.h"
#include "baton/comm/gloo_transport.h"
#include "baton/comm/tag.h"
#include "baton/comm/tensor_header.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace {

using detail::Clock;

// The control tag: above every c10d_tag() value (which fit in 31 bits).
constexpr int kControlTag = (1 << 30) + 7;

class NcclTransport;

class NcclSend : public detail::PendingSend {
 public:
  std::shared_ptr<detail::PendingSend> control;
  compat::WorkPtr payload;
  at::Tensor tensor;
  bool wait(Clock::time_point deadline) override {
    return control->wait(deadline) && detail::wait_until(payload, deadline);
  }
};

class NcclRecv : public detail::PendingRecv {
 public:
  NcclRecv(NcclTransport* transport, int src, int tag) : transport_(transport), src_(src), tag_(tag) {}
  at::Tensor wait(Clock::time_point deadline) override;

 private:
  NcclTransport* transport_;
  int src_, tag_;
};

class NcclTransport : public detail::Transport {
 public:
  // `control` is a CPU communicator's state whose transports carry the headers.
  NcclTransport(compat::BackendPtr nccl, std::shared_ptr<detail::CommState> control, at::Device device)
      : nccl_(std::move(nccl)), control_(std::move(control)), device_(device) {}
  const char* name() const override { return "nccl"; }

  std::shared_ptr<detail::PendingSend> isend(const at::Tensor& tensor, int dst, int tag) override {
    detail::TensorHeader header = detail::encode_header(tensor);
    at::Tensor words = at::empty({detail::kHeaderWords + 1}, at::kLong);
    words[0] = tag;
    std::memcpy(words.data_ptr<std::int64_t>() + 1, header.words.data(), detail::kHeaderBytes);
    auto send = std::make_shared<NcclSend>();
    send->control = control_->p2p[dst]->isend(words, dst, kControlTag);
    std::vector<at::Tensor> one{tensor};
    send->payload = nccl_->send(one, dst, 0);
    send->tensor = tensor;
    return send;
  }

  std::shared_ptr<detail::PendingRecv> irecv(int src, int tag) override {
    return std::make_shared<NcclRecv>(this, src, tag);
  }

  // Reads control messages from `src` in order, posting their NCCL receives,
  // until the one for `tag` has been posted; then waits for its payload.
  at::Tensor await(int src, int tag, Clock::time_point deadline) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& queue = arrived_[{src, tag}];
    while (queue.empty()) {
      at::Tensor words = control_->p2p[src]->irecv(src, kControlTag)->wait(deadline);
      if (!words.defined()) return at::Tensor();
      detail::TensorHeader header;
      std::memcpy(header.words.data(), words.data_ptr<std::int64_t>() + 1, detail::kHeaderBytes);
      detail::check_header(header, ::baton::detail::concat("rank ", src));
      Arrival arrival{detail::allocate_from_header(header, device_), nullptr};
      std::vector<at::Tensor> one{arrival.tensor};
      arrival.work = nccl_->recv(one, src, 0);
      arrived_[{src, static_cast<int>(words.data_ptr<std::int64_t>()[0])}].push_back(arrival);
    }
    Arrival arrival = queue.front();
    queue.pop_front();
    if (!detail::wait_until(arrival.work, deadline)) return at::Tensor();
    return arrival.tensor;
  }

 private:
  struct Arrival {
    at::Tensor tensor;
    compat::WorkPtr work;
  };
  compat::BackendPtr nccl_;
  std::shared_ptr<detail::CommState> control_;
  at::Device device_;
  std::mutex mutex_;
  std::map<std::pair<int, int>, std::deque<Arrival>> arrived_;
};

at::Tensor NcclRecv::wait(Clock::time_point deadline) { return transport_->await(src_, tag_, deadline); }

}  // namespace

Communicator connect_nccl(const ConnectOptions& options, int local_rank) {
  const int devices = static_cast<int>(c10::cuda::device_count());
  BATON_CHECK(local_rank >= 0 && local_rank < devices, "[comm.connect_nccl] rank ", options.rank,
              ": local rank ", local_rank, " has no GPU (", devices, " visible)");
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank));
  // The CPU control channel: a Gloo communicator of its own over the same store.
  Communicator control = connect(options);
  auto store = control.state()->store;
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->timeout = options.timeout;
  compat::BackendPtr backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(
      c10::make_intrusive<c10d::PrefixStore>("nccl/", store), options.rank, options.world_size,
      nccl_options);
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
  auto state = std::make_shared<detail::CommState>(backend, store, options.rank,
                                                   options.world_size, options.timeout, device,
                                                   "nccl");
  state->gloo_device = control.state()->gloo_device;  // groups reduce over Gloo
  state->transports.push_back(std::make_unique<NcclTransport>(backend, control.state(), device));
  for (int r = 0; r < options.world_size; ++r) {
    if (r != options.rank) state->p2p[r] = state->transports.back().get();
  }
  return Communicator(std::move(state));
}

}  // namespace baton::comm
