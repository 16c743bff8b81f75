// NCCL-backed communicators for CUDA tensors. Built from nccl_cuda.cpp with a
// CUDA LibTorch; otherwise nccl_nocuda.cpp, whose factory throws.
#pragma once

#include "baton/comm/communicator.h"

namespace baton::comm {

// Like connect(), with NCCL: rank r uses device cuda:local_rank, and tensors
// are sent, received and reduced on it. Point-to-point follows the protocol
// of ordered_transport.h: headers first over a CPU channel (a Gloo
// communicator's shared memory or TCP), payloads over NCCL, receives posted
// eagerly. Throws baton::Error when baton was built without CUDA, or when
// local_rank names no visible GPU.
Communicator connect_nccl(const ConnectOptions& options, int local_rank);

}  // namespace baton::comm
