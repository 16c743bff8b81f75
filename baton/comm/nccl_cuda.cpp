// NCCL-backed communicators; built only against a CUDA LibTorch. Untested in
// baton's CPU CI: it compiles only where CUDA is present.
#include "baton/comm/nccl.h"

#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL
#endif
#include <c10/cuda/CUDAFunctions.h>

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "baton/comm/comm_state.h"
#include "baton/core/error.h"

namespace baton::comm {

Communicator connect_nccl(const ConnectOptions& options, int local_rank) {
  const int devices = static_cast<int>(c10::cuda::device_count());
  BATON_CHECK(local_rank >= 0 && local_rank < devices, "[comm.connect_nccl] rank ", options.rank,
              ": local rank ", local_rank, " has no GPU (", devices, " visible)");
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank));
  auto store = detail::connect_store(options);
  store->setTimeout(options.timeout);
  auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
  nccl_options->timeout = options.timeout;
  compat::BackendPtr backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(
      store, options.rank, options.world_size, nccl_options);
  return Communicator(std::make_shared<detail::CommState>(
      std::move(backend), std::move(store), options.rank, options.world_size, options.timeout,
      at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(local_rank)),
      /*ordered_p2p=*/true, "nccl"));
}

}  // namespace baton::comm
