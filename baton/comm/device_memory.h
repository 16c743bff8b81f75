// A GPU's memory as its own allocator counts it: on CUDA, the caching
// allocator's statistics (what torch.cuda.memory_stats reads), for the
// device a rank computes on. The CPU's bytes are memory_counter.h's.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>

namespace baton::comm {

struct DeviceMemory {
  // Blocks handed out (sizes rounded up to the allocator's 512-byte blocks),
  // what they were asked for (unrounded), and what is reserved from the
  // driver (cached blocks included): now, and at the peak since the last reset.
  int64_t allocated_bytes = 0;
  int64_t peak_allocated_bytes = 0;
  int64_t requested_bytes = 0;
  int64_t peak_requested_bytes = 0;
  int64_t reserved_bytes = 0;
  int64_t peak_reserved_bytes = 0;
};

// `device`'s figures; none on the CPU, and none in a build without CUDA.
std::optional<DeviceMemory> device_memory(const c10::Device& device);

// Starts `device`'s peaks from what it holds now; nothing on the CPU.
void reset_device_memory_peak(const c10::Device& device);

// What the device's math libraries keep once they have run (cuBLAS and
// cuBLASLt workspaces, which come from the caching allocator): the bytes a
// small matrix product's forward and backward leave allocated on `device`, in
// fp32 and, where the device supports it, bf16. 0 on the CPU. Measured once
// per process (later calls return the first figure, as the workspaces stay).
int64_t device_library_bytes(const c10::Device& device);

}  // namespace baton::comm
