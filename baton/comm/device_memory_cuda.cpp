// device_memory.h on CUDA: the caching allocator's statistics. Built only
// against a CUDA LibTorch (device_memory_nocuda.cpp otherwise).
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/torch.h>

#include <mutex>

#include "baton/comm/device_memory.h"

namespace baton::comm {
namespace {

// The allocator's StatArray index of the sum over its pools (StatType::AGGREGATE).
constexpr int kAggregate = 0;

}  // namespace

std::optional<DeviceMemory> device_memory(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  DeviceMemory m;
  m.allocated_bytes = stats.allocated_bytes[kAggregate].current;
  m.peak_allocated_bytes = stats.allocated_bytes[kAggregate].peak;
  m.requested_bytes = stats.requested_bytes[kAggregate].current;
  m.peak_requested_bytes = stats.requested_bytes[kAggregate].peak;
  m.reserved_bytes = stats.reserved_bytes[kAggregate].current;
  m.peak_reserved_bytes = stats.reserved_bytes[kAggregate].peak;
  return m;
}

void reset_device_memory_peak(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

int64_t device_library_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return 0;
  static std::once_flag once;
  static int64_t bytes = 0;
  std::call_once(once, [&] {
    const int64_t before = device_memory(device)->allocated_bytes;
    for (const auto type : {torch::kFloat, torch::kBFloat16}) {
      const auto options = torch::TensorOptions().device(device).dtype(type);
      try {
        auto a = torch::ones({64, 64}, options.requires_grad(true));
        auto b = torch::ones({64, 64}, options.requires_grad(true));
        torch::mm(a, b).sum().backward();
      } catch (const c10::Error&) {
        // A GPU without bf16 products: its runs cannot use bf16 either.
      }
    }
    torch::cuda::synchronize(device.index());
    bytes = device_memory(device)->allocated_bytes - before;
  });
  return bytes;
}

}  // namespace baton::comm
