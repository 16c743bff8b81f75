// The one place that knows how c10d's C++ API differs between LibTorch
// versions. Everything else in baton/comm uses the names below.
//
//   LibTorch 1.13: ProcessGroupGloo and ProcessGroupNCCL derive from
//                  c10d::ProcessGroup; c10d::Work lives in Work.hpp.   (tested)
//   LibTorch 2.x:  they derive from c10d::Backend, and c10d::ProcessGroup
//                  became a dispatcher over backends.                   (untested)
//   LibTorch <1.13: work objects were c10d::ProcessGroup::Work.         (untested)
//
// baton talks to the backend object directly (send, recv, allreduce,
// barrier), whose signatures are the same in all three.
#pragma once

#include <torch/version.h>

// c10d guards its Gloo header with the macro that PyTorch's own build defines.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace baton::comm::compat {

#if TORCH_VERSION_MAJOR >= 2
using Backend = ::c10d::Backend;
#else
using Backend = ::c10d::ProcessGroup;
#endif

#if TORCH_VERSION_MAJOR >= 2 || (TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR >= 13)
using Work = ::c10d::Work;
#else
using Work = ::c10d::ProcessGroup::Work;
#endif

using BackendPtr = c10::intrusive_ptr<Backend>;

// Whether Gloo has a reduce-scatter: LibTorch 2.x's does; 1.13's throws
// that it is not supported.
#if TORCH_VERSION_MAJOR >= 2
inline constexpr bool kGlooReduceScatter = true;
#else
inline constexpr bool kGlooReduceScatter = false;
#endif
using WorkPtr = c10::intrusive_ptr<Work>;

// Runs `done` (on c10d's thread) when `work` completes, where the work has a
// future (Gloo's and NCCL's do in 1.13 and 2.x); else does nothing, and the
// caller notes the completion when its wait returns.
template <typename Done>
void on_completion(const WorkPtr& work, Done done) {
  if (!work) return;
  try {
    auto future = work->getFuture();
    if (future) future->addCallback([done](c10::ivalue::Future&) { done(); });
  } catch (...) {
  }
}

}  // namespace baton::comm::compat
