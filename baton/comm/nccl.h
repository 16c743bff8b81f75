// NCCL-backed communicators for CUDA tensors. Built from nccl_cuda.cpp with a
// CUDA LibTorch; otherwise nccl_nocuda.cpp, whose factory throws.
#pragma once

#include "baton/comm/communicator.h"

namespace baton::comm {

// Like connect(), with NCCL: rank r uses device cuda:local_rank, and tensors
// are sent, received and reduced on it. NCCL matches point-to-point messages
// by order, not tag (see Communicator::irecv).
// Throws baton::Error when baton was built without CUDA.
Communicator connect_nccl(const ConnectOptions& options, int local_rank);

}  // namespace baton::comm
