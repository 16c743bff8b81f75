// NCCL-backed communicators; built only against a CUDA LibTorch. The
// protocol (headers first over a CPU channel, receives posted eagerly) is
// ordered_transport.cpp's, which CI runs on the CPU; this file holds only the
// NCCL calls. Headers are built from sizes on the host: no device sync.
//
// The messages each way between two ranks take a process group of their own
// (one towards higher ranks, one towards lower): ProcessGroupNCCL runs a pair's
// sends and receives on one stream, where two ranks that both send a large
// tensor before receiving would each wait on the GPU for a receive queued
// behind their own send (NCCL: a send blocks the GPU until its receive runs).
#include "baton/comm/nccl.h"

#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <memory>
#include <vector>

#include "baton/comm/comm_state.h"
#include "baton/comm/gloo_transport.h"
#include "baton/comm/ordered_transport.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace {

using detail::Clock;

class NcclOp : public detail::ChannelOp {
 public:
  NcclOp(compat::WorkPtr work, at::Tensor tensor)
      : work_(std::move(work)), tensor_(std::move(tensor)) {}
  // Enqueued: the GPU completes it in stream order once the peer posts its half.
  bool settled() override { return true; }
  bool finish(Clock::time_point deadline) override {
    if (!detail::wait_until(work_, deadline)) return false;
    tensor_ = at::Tensor();
    return true;
  }

 private:
  compat::WorkPtr work_;
  at::Tensor tensor_;  // alive until the stream has ordered itself after the transfer
};

class NcclChannel : public detail::OrderedChannel {
 public:
  NcclChannel(int rank, compat::BackendPtr up, compat::BackendPtr down)
      : rank_(rank), up_(std::move(up)), down_(std::move(down)) {}

  std::shared_ptr<detail::ChannelOp> send(const at::Tensor& tensor, int dst) override {
    std::vector<at::Tensor> one{tensor};
    return std::make_shared<NcclOp>(lane(rank_, dst)->send(one, dst, 0), tensor);
  }

  std::shared_ptr<detail::ChannelOp> recv(const at::Tensor& tensor, int src) override {
    std::vector<at::Tensor> one{tensor};
    return std::make_shared<NcclOp>(lane(src, rank_)->recv(one, src, 0), tensor);
  }

 private:
  // Messages from a lower rank to a higher one go up, the others down.
  const compat::BackendPtr& lane(int from, int to) const { return from < to ? up_ : down_; }

  const int rank_;
  compat::BackendPtr up_, down_;
};

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
  const auto group = [&](const char* prefix) -> compat::BackendPtr {
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>(prefix, store), options.rank, options.world_size,
        nccl_options);
  };
  const at::Device device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
  compat::BackendPtr collectives = group("nccl/");
  compat::BackendPtr up = group("nccl-up/");
  compat::BackendPtr down = group("nccl-down/");
  return detail::connect_ordered(control, std::move(collectives),
                                 std::make_shared<NcclChannel>(options.rank, up, down), device,
                                 "nccl");
}

}  // namespace baton::comm
