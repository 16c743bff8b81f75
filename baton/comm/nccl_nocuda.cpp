// Stand-in for nccl_cuda.cpp in builds against a CPU-only LibTorch.
#include "baton/comm/nccl.h"
#include "baton/core/error.h"

namespace baton::comm {

Communicator connect_nccl(const ConnectOptions&, int) {
  throw Error("[comm] baton was built without CUDA; NCCL needs a CUDA LibTorch");
}

}  // namespace baton::comm
