// Point-to-point over Gloo (TCP), for peers on other hosts and as the
// fallback when shared memory cannot be used.
//
// One message per tensor in the steady state: header and payload travel in
// one buffer whose size the receiver expects, because it is the size of the
// last message with the same (peer, tag). When the size changes (the first
// message, a new sequence length), the sender fills the expected size with a
// header of kind kResized and sends the tensor in a second message on tag+1.
#pragma once

#include <memory>

#include "baton/comm/c10d_compat.h"
#include "baton/comm/transport.h"

namespace baton::comm::detail {

// `backend` must outlive the transport.
std::unique_ptr<Transport> make_gloo_transport(compat::BackendPtr backend, at::Device device);

// Waits for `work` until `deadline`: true when done, false on a timeout;
// rethrows any other failure.
bool wait_until(const compat::WorkPtr& work, Clock::time_point deadline);

}  // namespace baton::comm::detail
