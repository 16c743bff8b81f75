// What the point-to-point transports need of the process, checked before any
// rank starts (baton train's check_setup), and what they hold.
#pragma once

#include <cstdint>
#include <string>

namespace baton::comm {

// Empty when the shared-memory transport can create a rank's inbox in a
// group of `world_size` ranks under this process's limits; otherwise one line
// naming the limit (the file size limit, ulimit -f, which the inbox's memfd
// counts against), the bytes needed and what to do. Reads BATON_SHM_RING_KB.
std::string shm_transport_refusal(int world_size);

// The largest message the shared-memory transport copies into the
// receiver's ring at the send (an inline message): a send of at most this
// many bytes holds no tensor once isend returns. Reads BATON_SHM_RING_KB.
std::uint64_t shm_inline_bytes();

// The smallest message the shared-memory transport receives into a buffer
// it keeps for the next message of its (peer, tag): such a buffer is held
// from the first step on. A smaller message is allocated when it arrives and
// freed once the tensor it became is dropped.
std::uint64_t shm_kept_receive_bytes();

}  // namespace baton::comm
