// Receive buffers kept per (peer, tag) for the next message of the same
// size, so a steady-state receive writes into memory that is already mapped
// instead of faulting in fresh pages (64 MiB: 16k page faults per message).
// A buffer is reused only once nothing outside the cache refers to it: the
// tensor handed out earlier, and every view autograd saved of it, are gone.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace baton::comm::detail {

class BufferCache {
 public:
  // Below this, allocation is cheaper than keeping buffers around: a smaller
  // buffer is not kept, and lives only as long as the tensor handed out.
  static constexpr size_t kMinBytes = 64 << 10;

  // A tensor of `sizes` and `dtype` on the CPU: the cached buffer of `key`
  // when it has exactly the bytes needed and is free, else a new one, which
  // the cache then keeps for next time (from kMinBytes on).
  at::Tensor take(std::uint64_t key, at::ScalarType dtype, at::IntArrayRef sizes) {
    const auto options = at::TensorOptions().dtype(dtype);
    std::int64_t numel = 1;
    for (auto size : sizes) numel *= size;
    const auto bytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = storages_.find(key);
    if (it != storages_.end() && it->second.use_count() == 1 && it->second.nbytes() == bytes) {
      return at::empty({0}, options).set_(it->second, 0, sizes);
    }
    at::Tensor fresh = at::empty(sizes, options);
    if (bytes >= kMinBytes) storages_[key] = fresh.storage();
    return fresh;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, at::Storage> storages_;
};

}  // namespace baton::comm::detail
