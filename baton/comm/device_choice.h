// The device a rank computes and communicates on: the CPU, or the GPU that
// its local rank names (DESIGN.md: rank r uses cuda:LOCAL_RANK).
#pragma once

#include <c10/core/Device.h>

namespace baton::comm {

// `requested` as the process with `local_rank` on its machine uses it, where
// `visible_gpus` CUDA devices are visible to it: the CPU stays the CPU;
// "cuda:i" is cuda:i for every rank; "cuda" without an index is
// cuda:local_rank, one GPU per process. Throws baton::Error naming the local
// rank and the count when that GPU is not visible, and naming any device type
// other than cpu and cuda. REQUIRES: local_rank >= 0.
c10::Device device_for_local_rank(const c10::Device& requested, int local_rank, int visible_gpus);

// The same, with the CUDA devices this process sees.
c10::Device device_for_local_rank(const c10::Device& requested, int local_rank);

}  // namespace baton::comm
