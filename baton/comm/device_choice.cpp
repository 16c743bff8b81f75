#include "baton/comm/device_choice.h"

#include <torch/cuda.h>

#include "baton/core/error.h"

namespace baton::comm {

c10::Device device_for_local_rank(const c10::Device& requested, int local_rank, int visible_gpus) {
  BATON_ASSERT(local_rank >= 0, "negative local rank ", local_rank);
  if (requested.is_cpu()) return requested;
  BATON_CHECK(requested.is_cuda(), "[comm.device] device ", requested.str(),
              " is not supported; use cpu or cuda");
  BATON_CHECK(visible_gpus > 0, "[comm.device] device ", requested.str(),
              ": this process sees no CUDA device (or LibTorch was built without CUDA)");
  if (requested.has_index()) {
    BATON_CHECK(requested.index() < visible_gpus, "[comm.device] device ", requested.str(),
                " does not exist; ", visible_gpus, " CUDA device(s) are visible");
    return requested;
  }
  BATON_CHECK(local_rank < visible_gpus, "[comm.device] local rank ", local_rank,
              " would run on cuda:", local_rank, ", but ", visible_gpus,
              " CUDA device(s) are visible: start at most ", visible_gpus,
              " ranks per machine, one GPU each");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

c10::Device device_for_local_rank(const c10::Device& requested, int local_rank) {
  const int visible = requested.is_cuda() ? static_cast<int>(torch::cuda::device_count()) : 0;
  return device_for_local_rank(requested, local_rank, visible);
}

}  // namespace baton::comm
