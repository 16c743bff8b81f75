#include "baton/comm/shm_transport.h"
#include "baton/comm/transport_limits.h"

#include <ATen/Parallel.h>
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "baton/comm/buffer_cache.h"
#include "baton/comm/gloo_transport.h"
#include "baton/comm/shm_inbox.h"
#include "baton/comm/spin_policy.h"
#include "baton/comm/tensor_header.h"
#include "baton/core/error.h"

namespace baton::comm::detail {
namespace {

using ::baton::detail::concat;

constexpr std::uint32_t kRecordMagic = 0x7265636f;  // "reco"
constexpr std::uint32_t kRecordData = 1;
constexpr std::uint32_t kRecordPad = 2;
constexpr std::uint64_t kAlign = 64;

struct RecordHead {
  std::uint32_t magic;
  std::uint32_t type;
  std::int32_t tag;
  std::int32_t unused;
  std::uint64_t length;       // the whole record, payload included, a multiple of kAlign
  std::uint64_t remote_addr;  // kRemote: the payload's address in the sender
  std::uint64_t unused2;
  TensorHeader header;
};
constexpr std::uint64_t kRecordHeadBytes = (sizeof(RecordHead) + kAlign - 1) / kAlign * kAlign;

constexpr std::uint64_t round_up(std::uint64_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

std::string std_string(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}
std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

// false once `pid` has exited (also as a zombie nobody has reaped yet).
bool process_alive(int pid) {
  std::ifstream stat(concat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

// One message that has left the ring and waits for its receive.
struct Arrival {
  at::Tensor tensor;
  compat::WorkPtr work;  // kGloo: the payload's receive
};

class ShmTransport;

class DoneSend : public PendingSend {
 public:
  bool wait(Clock::time_point) override { return true; }
};

class WorkSend : public PendingSend {
 public:
  WorkSend(compat::WorkPtr work, at::Tensor tensor)
      : work_(std::move(work)), tensor_(std::move(tensor)) {}
  bool wait(Clock::time_point deadline) override { return wait_until(work_, deadline); }

 private:
  compat::WorkPtr work_;
  at::Tensor tensor_;
};

class RemoteSend : public PendingSend {
 public:
  RemoteSend(ShmTransport* transport, int dst, std::uint64_t end, at::Tensor tensor)
      : transport_(transport), dst_(dst), end_(end), tensor_(std::move(tensor)) {}
  bool wait(Clock::time_point deadline) override;
  bool done() const;

 private:
  ShmTransport* transport_;
  int dst_;
  std::uint64_t end_;  // the ring position past this record
  at::Tensor tensor_;  // the memory the receiver reads
};

class ShmRecv : public PendingRecv {
 public:
  ShmRecv(ShmTransport* transport, int src, int tag)
      : transport_(transport), src_(src), tag_(tag) {}
  at::Tensor wait(Clock::time_point deadline) override;

 private:
  ShmTransport* transport_;
  int src_, tag_;
};

class ShmTransport : public Transport {
 public:
  ShmTransport(int rank, int world_size, std::vector<bool> peers, compat::BackendPtr gloo,
               std::chrono::milliseconds timeout, ShmOptions options)
      : rank_(rank),
        world_size_(world_size),
        peers_(std::move(peers)),
        gloo_(std::move(gloo)),
        timeout_(timeout),
        options_(options),
        pid_(getpid()),
        peer_inboxes_(static_cast<size_t>(world_size)),
        peer_pids_(static_cast<size_t>(world_size), 0),
        tails_(static_cast<size_t>(world_size), 0),
        heads_(static_cast<size_t>(world_size), 0),
        spin_(world_size, options_.spin, SpinPolicy::affinity_cores()) {
    local_ranks_ = 1;
    for (int r = 0; r < world_size_; ++r) local_ranks_ += r != rank_ && peers_[r] ? 1 : 0;
  }

  ~ShmTransport() override {
    // A receiver may still be copying a large payload out of this process.
    const auto deadline =
        Clock::now() + std::min<Clock::duration>(timeout_, std::chrono::seconds(5));
    try {
      for (auto& send : outstanding_) send->wait(deadline);
    } catch (...) {
    }
    if (inbox_.mapped()) {
      inbox_.header().closed.store(1, std::memory_order_seq_cst);
      for (int r = 0; r < world_size_; ++r)
        if (peer_inboxes_[r] && peer_inboxes_[r]->mapped())
          ring_doorbell(peer_inboxes_[r]->header());
    }
  }

  const char* name() const override { return "shm"; }

  void setup(c10d::Store& store, const std::string& prefix);

  std::shared_ptr<PendingSend> isend(const at::Tensor& tensor, int dst, int tag) override;
  std::shared_ptr<PendingRecv> irecv(int src, int tag) override {
    return std::make_shared<ShmRecv>(this, src, tag);
  }

  // Waits for the message (src, tag): the tensor, or undefined at the deadline.
  at::Tensor await(int src, int tag, Clock::time_point deadline);
  // Waits until `done()` holds, draining this rank's inbox meanwhile.
  template <typename Done>
  bool progress_until(int peer, Clock::time_point deadline, Done done);
  RingControl& out_control(int dst) const { return peer_inboxes_[dst]->control(rank_); }

 private:
  void drain_locked();
  bool take_locked(int src, int tag, Arrival* out);
  // Throws when `peer` has closed its transport or its process has exited.
  void check_alive(int peer);
  std::uint64_t reserve(int dst, std::uint64_t length);

  const int rank_, world_size_;
  const std::vector<bool> peers_;
  compat::BackendPtr gloo_;
  const std::chrono::milliseconds timeout_;
  const ShmOptions options_;
  const int pid_;

  Inbox inbox_;
  std::vector<std::unique_ptr<Inbox>> peer_inboxes_;
  std::vector<int> peer_pids_;

  std::mutex recv_mutex_;  // the tails, arrivals and draining
  std::vector<std::uint64_t> tails_;
  std::map<std::pair<int, int>, std::deque<Arrival>> arrived_;
  BufferCache buffers_;

  std::mutex send_mutex_;  // the heads and outstanding sends
  std::vector<std::uint64_t> heads_;
  std::vector<std::shared_ptr<RemoteSend>> outstanding_;
  std::int64_t probe_ = 0;

  std::mutex spin_mutex_;  // the spin policy
  SpinPolicy spin_;
  int local_ranks_ = 1;  // this rank and its same-host peers
};

void ShmTransport::setup(c10d::Store& store, const std::string& prefix) {
  bool any = false;
  for (int r = 0; r < world_size_; ++r) any |= r != rank_ && peers_[r];
  if (!any) return;
  std::mt19937_64 random(std::random_device{}() ^ static_cast<std::uint64_t>(pid_));
  probe_ = static_cast<std::int64_t>(random() >> 1);
  inbox_.create(world_size_, options_.ring_bytes);
  store.set(concat(prefix, "inbox/", rank_),
            bytes_of(concat(inbox_.path(), " ", pid_, " ",
                            reinterpret_cast<std::uintptr_t>(&probe_), " ", probe_)));
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_ || !peers_[r]) continue;
    std::string peer_path;
    std::uintptr_t address = 0;
    std::int64_t expected = 0;
    std::istringstream in(std_string(store.get(concat(prefix, "inbox/", r))));
    in >> peer_path >> peer_pids_[r] >> address >> expected;
    peer_inboxes_[r] = std::make_unique<Inbox>();
    peer_inboxes_[r]->open(peer_path, peer_pids_[r]);
    // Can this rank copy out of r's memory? Then r may send large payloads by address.
    std::int64_t value = 0;
    struct iovec local {
      &value, sizeof(value)
    };
    struct iovec remote {
      reinterpret_cast<void*>(address), sizeof(value)
    };
    const bool remote_ok =
        options_.remote_copy &&
        process_vm_readv(peer_pids_[r], &local, 1, &remote, 1, 0) == sizeof(value) &&
        value == expected;
    inbox_.control(r).remote_ok.store(remote_ok ? 1 : 0, std::memory_order_release);
  }
  // No rank sends before its peers have said whether they can read its memory.
  store.set(concat(prefix, "opened/", rank_), bytes_of("1"));
  for (int r = 0; r < world_size_; ++r) {
    if (r != rank_ && peers_[r]) store.get(concat(prefix, "opened/", r));
  }
}

std::uint64_t ShmTransport::reserve(int dst, std::uint64_t length) {
  Inbox& inbox = *peer_inboxes_[dst];
  const std::uint64_t capacity = inbox.ring_bytes();
  RingControl& control = inbox.control(rank_);
  std::uint64_t head = heads_[dst];
  const std::uint64_t offset = head % capacity;
  const std::uint64_t pad = offset + length > capacity ? capacity - offset : 0;
  const auto fits = [&] {
    return capacity - (head - control.tail.load(std::memory_order_acquire)) >= pad + length;
  };
  if (!fits()) {
    const bool ok = progress_until(dst, Clock::now() + timeout_, fits);
    BATON_CHECK(ok, "[comm.shm] rank ", rank_, " timed out after ", timeout_.count(),
                " ms waiting for room in rank ", dst, "'s shared-memory ring");
  }
  if (pad > 0) {
    auto* marker = reinterpret_cast<RecordHead*>(inbox.ring(rank_) + offset);
    marker->magic = kRecordMagic;
    marker->type = kRecordPad;
    marker->length = pad;
    head += pad;
  }
  return head;
}

std::shared_ptr<PendingSend> ShmTransport::isend(const at::Tensor& tensor, int dst, int tag) {
  BATON_ASSERT(peer_inboxes_[dst], "rank ", dst, " is not a shared-memory peer");
  Inbox& inbox = *peer_inboxes_[dst];
  const std::int64_t payload = tensor.numel() * static_cast<std::int64_t>(tensor.element_size());
  MessageKind kind = MessageKind::kInline;
  if (static_cast<std::uint64_t>(payload) > options_.inline_bytes ||
      kRecordHeadBytes + round_up(static_cast<std::uint64_t>(payload)) > inbox.ring_bytes() / 2) {
    kind = out_control(dst).remote_ok.load(std::memory_order_acquire) ? MessageKind::kRemote
                                                                      : MessageKind::kGloo;
  }
  const std::uint64_t length =
      kRecordHeadBytes +
      (kind == MessageKind::kInline ? round_up(static_cast<std::uint64_t>(payload)) : 0);
  std::lock_guard<std::mutex> lock(send_mutex_);
  outstanding_.erase(std::remove_if(outstanding_.begin(), outstanding_.end(),
                                    [](const auto& send) { return send->done(); }),
                     outstanding_.end());
  const std::uint64_t at = reserve(dst, length);
  char* ring = inbox.ring(rank_);
  auto* record = reinterpret_cast<RecordHead*>(ring + at % inbox.ring_bytes());
  record->magic = kRecordMagic;
  record->type = kRecordData;
  record->tag = tag;
  record->length = length;
  record->remote_addr = reinterpret_cast<std::uintptr_t>(tensor.data_ptr());
  record->header = encode_header(tensor, kind);
  if (kind == MessageKind::kInline && payload > 0) {
    std::memcpy(reinterpret_cast<char*>(record) + kRecordHeadBytes, tensor.data_ptr(),
                static_cast<size_t>(payload));
  }
  std::shared_ptr<PendingSend> pending;
  if (kind == MessageKind::kGloo) {
    std::vector<at::Tensor> one{tensor};
    pending = std::make_shared<WorkSend>(gloo_->send(one, dst, tag + 1), tensor);
  }
  count_messages(kind == MessageKind::kGloo ? 2 : 1);
  heads_[dst] = at + length;
  inbox.control(rank_).head.store(at + length, std::memory_order_release);
  ring_doorbell(inbox.header());
  if (kind == MessageKind::kRemote) {
    auto remote = std::make_shared<RemoteSend>(this, dst, at + length, tensor);
    outstanding_.push_back(remote);
    return remote;
  }
  return pending ? pending : std::make_shared<DoneSend>();
}

void ShmTransport::drain_locked() {
  if (!inbox_.mapped()) return;
  const std::uint64_t capacity = inbox_.ring_bytes();
  for (int src = 0; src < world_size_; ++src) {
    if (!peer_inboxes_[src]) continue;
    RingControl& control = inbox_.control(src);
    const std::uint64_t head = control.head.load(std::memory_order_acquire);
    std::uint64_t tail = tails_[src];
    if (tail == head) continue;
    const char* ring = inbox_.ring(src);
    const std::string from = "rank " + std::to_string(src);  // no stream: this is the hot path
    while (tail < head) {
      const auto* record = reinterpret_cast<const RecordHead*>(ring + tail % capacity);
      BATON_CHECK(
          record->magic == kRecordMagic && record->length % kAlign == 0 && record->length > 0,
          "[comm.shm] corrupt record from ", from, " at ring position ", tail);
      if (record->type == kRecordData) {
        check_header(record->header, from);
        Arrival arrival;
        arrival.tensor = buffers_.take(
            (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(record->tag),
            record->header.dtype(), record->header.sizes());
        const auto bytes = static_cast<size_t>(record->header.payload_bytes());
        switch (record->header.kind()) {
          case MessageKind::kInline:
            if (bytes > 0)
              std::memcpy(arrival.tensor.data_ptr(),
                          reinterpret_cast<const char*>(record) + kRecordHeadBytes, bytes);
            break;
          case MessageKind::kRemote: {
            size_t done = 0;
            while (done < bytes) {
              struct iovec local {
                static_cast<char*>(arrival.tensor.data_ptr()) + done, bytes - done
              };
              struct iovec remote {
                reinterpret_cast<void*>(record->remote_addr + done), bytes - done
              };
              const ssize_t n = process_vm_readv(peer_pids_[src], &local, 1, &remote, 1, 0);
              if (n <= 0) {
                throw std::runtime_error(concat("peer rank ", src, " closed the connection (",
                                                std::strerror(errno), " reading its memory)"));
              }
              done += static_cast<size_t>(n);
            }
            break;
          }
          case MessageKind::kGloo: {
            std::vector<at::Tensor> one{arrival.tensor};
            arrival.work = gloo_->recv(one, src, record->tag + 1);
            break;
          }
          default:
            BATON_CHECK(false, "[comm.shm] record from ", from, " has message kind ",
                        static_cast<int>(record->header.kind()));
        }
        arrived_[{src, record->tag}].push_back(std::move(arrival));
      }
      tail += record->length;
    }
    tails_[src] = tail;
    control.tail.store(tail, std::memory_order_release);
    ring_doorbell(peer_inboxes_[src]->header());  // a sender may wait for room or its copy
  }
}

bool ShmTransport::take_locked(int src, int tag, Arrival* out) {
  auto it = arrived_.find({src, tag});
  if (it == arrived_.end() || it->second.empty()) return false;
  *out = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) arrived_.erase(it);
  return true;
}

void ShmTransport::check_alive(int peer) {
  Inbox& inbox = *peer_inboxes_[peer];
  if (inbox.header().closed.load(std::memory_order_acquire) != 0) {
    throw std::runtime_error(concat("peer rank ", peer, " closed the connection"));
  }
  if (peer_pids_[peer] != pid_ && !process_alive(peer_pids_[peer])) {
    throw std::runtime_error(
        concat("peer rank ", peer, " closed the connection (its process exited)"));
  }
}

template <typename Done>
bool ShmTransport::progress_until(int peer, Clock::time_point deadline, Done done) {
  const auto start = Clock::now();
  auto next_check = start + std::chrono::milliseconds(10);
  InboxHeader& bell = inbox_.header();
  const auto finished = [&] {
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    std::lock_guard<std::mutex> lock(spin_mutex_);
    spin_.record(peer, waited);
    return true;
  };
  for (;;) {
    const std::uint32_t seen = bell.doorbell.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(recv_mutex_);
      drain_locked();
    }
    if (done()) return finished();
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (now >= next_check) {
      try {
        check_alive(peer);
      } catch (...) {
        // What it published before it went is still ours.
        {
          std::lock_guard<std::mutex> lock(recv_mutex_);
          drain_locked();
        }
        if (done()) return finished();
        throw;
      }
      next_check = now + std::chrono::milliseconds(10);
    }
    std::chrono::microseconds spin;
    {
      std::lock_guard<std::mutex> lock(spin_mutex_);
      if (spin_.sample_due(now)) {
        spin_.set_job_threads(local_ranks_ * at::get_num_threads());
        spin_.sample_runnable(SpinPolicy::read_runnable());
      }
      spin = spin_.budget(peer);
    }
    // Spin briefly, yielding, while the machine has a core to spare
    // (spin_policy.h): a peer waiting for this core gets it at once.
    const auto spin_end = now + spin;
    while (bell.doorbell.load(std::memory_order_acquire) == seen && Clock::now() < spin_end) {
      sched_yield();
    }
    if (bell.doorbell.load(std::memory_order_acquire) == seen) {
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
          std::min(deadline, next_check) - Clock::now());
      if (left.count() > 0) sleep_on_doorbell(bell, seen, left);
    }
  }
}

at::Tensor ShmTransport::await(int src, int tag, Clock::time_point deadline) {
  Arrival arrival;
  const bool arrived = progress_until(src, deadline, [&] {
    std::lock_guard<std::mutex> lock(recv_mutex_);
    return take_locked(src, tag, &arrival);
  });
  if (!arrived) return at::Tensor();
  if (arrival.work && !wait_until(arrival.work, deadline)) return at::Tensor();
  return arrival.tensor;
}

bool RemoteSend::done() const {
  return transport_->out_control(dst_).tail.load(std::memory_order_acquire) >= end_;
}

bool RemoteSend::wait(Clock::time_point deadline) {
  if (!transport_->progress_until(dst_, deadline, [&] { return done(); })) return false;
  tensor_ = at::Tensor();  // copied: its buffer may be reused at once
  return true;
}

at::Tensor ShmRecv::wait(Clock::time_point deadline) {
  return transport_->await(src_, tag_, deadline);
}

std::uint64_t env_number(const char* name, std::uint64_t fallback, std::uint64_t low,
                         std::uint64_t high) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  BATON_CHECK(errno == 0 && *end == '\0' && value >= low && value <= high, "[comm.shm] ", name,
              " must be an integer in [", low, ", ", high, "], got \"", text, "\"");
  return value;
}

}  // namespace

ShmOptions ShmOptions::from_env() {
  ShmOptions options;
  options.ring_bytes = env_number("BATON_SHM_RING_KB", options.ring_bytes >> 10, 64, 1 << 20) << 10;
  options.spin =
      std::chrono::microseconds(env_number("BATON_SHM_SPIN_US", options.spin.count(), 0, 100000));
  options.remote_copy = env_number("BATON_SHM_CMA", 1, 0, 1) == 1;
  return options;
}

std::unique_ptr<Transport> make_shm_transport(c10d::Store& store, const std::string& prefix,
                                              int rank, int world_size,
                                              const std::vector<bool>& peers,
                                              compat::BackendPtr gloo,
                                              std::chrono::milliseconds timeout,
                                              const ShmOptions& options) {
  auto transport =
      std::make_unique<ShmTransport>(rank, world_size, peers, std::move(gloo), timeout, options);
  transport->setup(store, prefix);
  return transport;
}

}  // namespace baton::comm::detail

namespace baton::comm {

std::string shm_transport_refusal(int world_size) {
  const detail::ShmOptions options = detail::ShmOptions::from_env();
  return detail::file_size_refusal(detail::inbox_bytes(world_size, options.ring_bytes));
}

std::uint64_t shm_inline_bytes() {
  const detail::ShmOptions options = detail::ShmOptions::from_env();
  // isend's test: the payload within inline_bytes and its record within half the ring.
  const std::uint64_t in_ring =
      (options.ring_bytes / 2 - detail::kRecordHeadBytes) / detail::kAlign * detail::kAlign;
  return std::min(options.inline_bytes, in_ring);
}

std::uint64_t shm_kept_receive_bytes() {
  return detail::BufferCache::kMinBytes;
}

}  // namespace baton::comm
