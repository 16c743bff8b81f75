#include "baton/comm/shm_inbox.h"

#include <sys/resource.h>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <new>

#include "baton/core/error.h"

namespace baton::comm::detail {
namespace {

constexpr std::uint64_t round_up(std::uint64_t n, std::uint64_t to) {
  return (n + to - 1) / to * to;
}

std::uint64_t layout_bytes(int world_size, std::uint64_t ring_bytes, std::uint64_t* controls_at,
                           std::uint64_t* rings_at) {
  *controls_at = round_up(sizeof(InboxHeader), 4096);
  *rings_at =
      round_up(*controls_at + sizeof(RingControl) * static_cast<std::uint64_t>(world_size), 4096);
  return *rings_at + ring_bytes * static_cast<std::uint64_t>(world_size);
}

}  // namespace

std::uint64_t inbox_bytes(int world_size, std::uint64_t ring_bytes) {
  std::uint64_t controls_at = 0, rings_at = 0;
  return layout_bytes(world_size, ring_bytes, &controls_at, &rings_at);
}

std::string file_size_refusal(std::uint64_t bytes) {
  rlimit limit{};
  if (getrlimit(RLIMIT_FSIZE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY ||
      limit.rlim_cur >= bytes)
    return "";
  return ::baton::detail::concat(
      "[comm.shm] the shared-memory transport needs a file of ", bytes,
      " bytes for each rank's inbox, past this process's file size limit of ", limit.rlim_cur,
      " bytes (ulimit -f); raise the limit, or use --transport gloo");
}

Inbox::~Inbox() {
  if (base_ != nullptr) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

void Inbox::map(int fd, std::uint64_t bytes) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  BATON_CHECK(base != MAP_FAILED, "[comm.shm] cannot map ", name_, " (", bytes,
              " bytes): ", std::strerror(errno));
  base_ = base;
  bytes_ = bytes;
}

void Inbox::create(int world_size, std::uint64_t ring_bytes) {
  std::uint64_t controls_at = 0, rings_at = 0;
  const std::uint64_t bytes = layout_bytes(world_size, ring_bytes, &controls_at, &rings_at);
  fd_ = memfd_create("baton.inbox", MFD_CLOEXEC);
  BATON_CHECK(fd_ >= 0, "[comm.shm] cannot create a shared-memory inbox: ", std::strerror(errno),
              "; use --transport gloo");
  name_ = path();
  // Reserve the pages now, so a lack of memory fails here and not as SIGBUS later.
  const int err = posix_fallocate(fd_, 0, static_cast<off_t>(bytes));
  // SIGXFSZ is ignored (tools/main.cpp): a file size limit reads as EFBIG.
  BATON_CHECK(err != EFBIG, file_size_refusal(bytes));
  BATON_CHECK(err == 0, "[comm.shm] no room for ", bytes, " bytes of shared memory (",
              std::strerror(err), "); set BATON_SHM_RING_KB lower or use --transport gloo");
  map(fd_, bytes);
  header_ = new (base_) InboxHeader();
  header_->owner_pid = static_cast<std::int32_t>(getpid());
  header_->world_size = world_size;
  header_->ring_bytes = ring_bytes;
  controls_ = reinterpret_cast<RingControl*>(static_cast<char*>(base_) + controls_at);
  for (int r = 0; r < world_size; ++r) new (&controls_[r]) RingControl();
  rings_ = static_cast<char*>(base_) + rings_at;
  ring_bytes_ = ring_bytes;
  std::atomic_thread_fence(std::memory_order_release);
  header_->magic = kInboxMagic;
}

std::string Inbox::path() const {
  BATON_ASSERT(fd_ >= 0, "path() of an inbox this process did not create");
  return ::baton::detail::concat("/proc/", getpid(), "/fd/", fd_);
}

void Inbox::open(const std::string& path, int owner_pid) {
  name_ = path;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  BATON_CHECK(
      fd >= 0, "[comm.shm] cannot open a peer's shared memory ", path, ": ", std::strerror(errno),
      " (its process must be alive, of the same user and dumpable; or use --transport gloo)");
  struct stat st {};
  const bool sized = fstat(fd, &st) == 0;
  try {
    BATON_CHECK(sized, "[comm.shm] cannot read the size of ", path, ": ", std::strerror(errno));
    map(fd, static_cast<std::uint64_t>(st.st_size));
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);  // the mapping keeps the memory
  header_ = static_cast<InboxHeader*>(base_);
  BATON_CHECK(bytes_ >= sizeof(InboxHeader) && header_->magic == kInboxMagic &&
                  header_->owner_pid == owner_pid,
              "[comm.shm] ", path, " is not the baton inbox of process ", owner_pid);
  std::uint64_t controls_at = 0, rings_at = 0;
  const std::uint64_t expected =
      layout_bytes(header_->world_size, header_->ring_bytes, &controls_at, &rings_at);
  BATON_CHECK(expected == bytes_, "[comm.shm] ", path, " has ", bytes_, " bytes, expected ",
              expected);
  controls_ = reinterpret_cast<RingControl*>(static_cast<char*>(base_) + controls_at);
  rings_ = static_cast<char*>(base_) + rings_at;
  ring_bytes_ = header_->ring_bytes;
}

void ring_doorbell(InboxHeader& header) {
  header.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (header.sleepers.load(std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&header.doorbell), FUTEX_WAKE, INT_MAX,
            nullptr, nullptr, 0);
  }
}

void sleep_on_doorbell(InboxHeader& header, std::uint32_t seen, std::chrono::microseconds limit) {
  header.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (header.doorbell.load(std::memory_order_seq_cst) == seen) {
    struct timespec ts {};
    ts.tv_sec = static_cast<time_t>(limit.count() / 1000000);
    ts.tv_nsec = static_cast<long>(limit.count() % 1000000) * 1000;
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&header.doorbell), FUTEX_WAIT, seen, &ts,
            nullptr, 0);
  }
  header.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace baton::comm::detail
