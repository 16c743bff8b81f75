// A rank's shared-memory inbox: one ring per source rank, written by that
// source and read by the owner, plus a doorbell futex that every writer rings.
// The owner creates it as an anonymous file (memfd_create) and keeps it open;
// same-host peers map it through /proc/<owner pid>/fd/<fd>. It never has a
// name in /dev/shm, so however any rank exits, even killed in the middle of
// setting up, its memory goes with the last process that maps it.
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
  alignas(64) std::atomic<std::uint64_t> head;       // bytes published by the source
  alignas(64) std::atomic<std::uint64_t> tail;       // bytes consumed by the owner
  alignas(64) std::atomic<std::uint32_t> remote_ok;  // the owner can read the source's memory
};

// The bytes of one rank's inbox for `world_size` sources of `ring_bytes` each.
std::uint64_t inbox_bytes(int world_size, std::uint64_t ring_bytes);

// Empty when this process's file size limit (RLIMIT_FSIZE, which a memfd's
// pages count against) allows a file of `bytes`; else one line saying what
// the transport needs, the limit, and what to do.
std::string file_size_refusal(std::uint64_t bytes);

// A mapped inbox (owned or a peer's).
class Inbox {
 public:
  Inbox() = default;
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;
  ~Inbox();

  // Creates and maps an inbox with one ring of `ring_bytes` per rank.
  // Throws baton::Error (naming the bytes) when the memory cannot be reserved.
  void create(int world_size, std::uint64_t ring_bytes);
  // Where a process on this host opens it while this owner is alive:
  // "/proc/<pid>/fd/<fd>". REQUIRES: create() has succeeded.
  std::string path() const;
  // Maps the inbox that process `owner_pid` published as `path`. Throws
  // baton::Error naming the path when it cannot be opened (the owner is gone,
  // or /proc refuses: another user, a non-dumpable process) or is malformed.
  void open(const std::string& path, int owner_pid);

  InboxHeader& header() const { return *header_; }
  RingControl& control(int source) const { return controls_[source]; }
  char* ring(int source) const { return rings_ + static_cast<std::uint64_t>(source) * ring_bytes_; }
  std::uint64_t ring_bytes() const { return ring_bytes_; }
  bool mapped() const { return header_ != nullptr; }

 private:
  void map(int fd, std::uint64_t bytes);
  std::string name_;  // for messages
  int fd_ = -1;       // the owner's, open for the inbox's life so that peers can open it
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
