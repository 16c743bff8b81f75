// Stand-in for device_memory_cuda.cpp in builds against a CPU-only LibTorch.
#include "baton/comm/device_memory.h"
#include "baton/core/error.h"

namespace baton::comm {

std::optional<DeviceMemory> device_memory(const c10::Device&) {
  return std::nullopt;
}

void reset_device_memory_peak(const c10::Device&) {}

int64_t device_library_bytes(const c10::Device& device) {
  BATON_CHECK(device.is_cpu(), "[comm] baton was built without CUDA; device ", device.str(),
              " needs a CUDA LibTorch");
  return 0;
}

}  // namespace baton::comm
