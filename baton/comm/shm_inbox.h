// A rank's shared-memory inbox: one ring per source rank, written by that
// source and read by the owner, plus a doorbell futex that every writer rings.
// The owner creates it; same-host peers map it. Names are unlinked as soon as
// every peer has mapped it, so nothing is left in /dev/shm once the
// rendezvous is over, however a rank exits afterwards.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace baton::comm::detail {

inline constexpr std::uint64_t kInboxMagic = 0x62746e73686d3031;  // "btnshm01"

struct alignas(64) InboxHeader {
  std::uint64_t magic;
  std::int32_t owner_pid;
  std::int32_t world_size;
  std::uint64_t ring_bytes;
  alignas(64) std::atomic<std::uint32_t> doorbell;  // bumped by every writer and reader
  alignas(64) std::atomic<std::uint32_t> sleepers;  // owner threads in futex_wait
  alignas(64) std::atomic<std::uint32_t> closed;    // the owner has shut down
};

struct alignas(64) RingControl {
  alignas(64) std::atomic<std::uint64_t> head;  // bytes published by the source
  alignas(64) std::atomic<std::uint64_t> tail;  // bytes consumed by the owner
  alignas(64) std::atomic<std::uint32_t> remote_ok;  // the owner can read the source's memory
};

// A mapped inbox (owned or a peer's).
class Inbox {
 public:
  Inbox() = default;
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;
  ~Inbox();

  // Creates and maps /dev/shm/<name> with one ring of `ring_bytes` per rank.
  // Throws baton::Error (naming the name and the bytes) when /dev/shm lacks room.
  void create(const std::string& name, int world_size, std::uint64_t ring_bytes);
  // Maps a peer's inbox. Throws baton::Error when it is missing or malformed.
  void open(const std::string& name);
  void unlink();

  InboxHeader& header() const { return *header_; }
  RingControl& control(int source) const { return controls_[source]; }
  char* ring(int source) const { return rings_ + static_cast<std::uint64_t>(source) * ring_bytes_; }
  std::uint64_t ring_bytes() const { return ring_bytes_; }
  bool mapped() const { return header_ != nullptr; }

 private:
  void map(int fd, std::uint64_t bytes);
  std::string name_;
  bool owner_ = false;
  void* base_ = nullptr;
  std::uint64_t bytes_ = 0;
  InboxHeader* header_ = nullptr;
  RingControl* controls_ = nullptr;
  char* rings_ = nullptr;
  std::uint64_t ring_bytes_ = 0;
};

// Rings `header`'s doorbell, waking its owner if it sleeps.
void ring_doorbell(InboxHeader& header);
// Sleeps on `header`'s doorbell while it still reads `seen`, at most `limit`.
void sleep_on_doorbell(InboxHeader& header, std::uint32_t seen, std::chrono::microseconds limit);

}  // namespace baton::comm::detail
