#include "baton/comm/gloo_transport.h"

#include <cstring>
#include <mutex>
#include <unordered_map>

#include "baton/comm/buffer_cache.h"
#include "baton/comm/comm_state.h"
#include "baton/comm/tensor_header.h"
#include "baton/core/error.h"

namespace baton::comm::detail {
namespace {

std::uint64_t key_of(int peer, int tag) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(peer)) << 32) |
         static_cast<std::uint32_t>(tag);
}

// `buffer` (uint8, total bytes) filled with `header` followed by `payload`.
at::Tensor pack(const TensorHeader& header, const at::Tensor& payload, at::Tensor buffer) {
  const std::int64_t total_bytes = buffer.numel();
  auto* out = static_cast<char*>(buffer.data_ptr());
  std::memcpy(out, header.words.data(), kHeaderBytes);
  if (payload.defined() && total_bytes > kHeaderBytes) {
    std::memcpy(out + kHeaderBytes, payload.data_ptr(),
                static_cast<size_t>(total_bytes - kHeaderBytes));
  }
  return buffer;
}

// The tensor inside a received buffer, sharing its storage.
at::Tensor unpack(const at::Tensor& buffer, const TensorHeader& header) {
  auto* data = static_cast<char*>(buffer.data_ptr()) + kHeaderBytes;
  at::Tensor keep = buffer;
  return at::from_blob(
      data, header.sizes(), [keep](void*) mutable { keep.reset(); },
      at::TensorOptions().dtype(header.dtype()));
}

TensorHeader read_header(const at::Tensor& buffer) {
  TensorHeader header;
  std::memcpy(header.words.data(), buffer.data_ptr(), kHeaderBytes);
  return header;
}

class GlooTransport;

class GlooSend : public PendingSend {
 public:
  std::vector<compat::WorkPtr> works;
  std::vector<at::Tensor> buffers;  // alive until the sends complete
  bool wait(Clock::time_point deadline) override {
    for (auto& work : works)
      if (!wait_until(work, deadline)) return false;
    return true;
  }
};

class GlooRecv : public PendingRecv {
 public:
  GlooRecv(GlooTransport* transport, int src, int tag)
      : transport_(transport), src_(src), tag_(tag) {}
  at::Tensor wait(Clock::time_point deadline) override;

  GlooTransport* transport_;
  int src_, tag_;
  at::Tensor buffer_;
  compat::WorkPtr work_;  // null until posted
};

class GlooTransport : public Transport {
 public:
  GlooTransport(compat::BackendPtr backend, at::Device device)
      : backend_(std::move(backend)), device_(device) {}
  const char* name() const override { return "gloo"; }

  std::shared_ptr<PendingSend> isend(const at::Tensor& tensor, int dst, int tag) override {
    TensorHeader header = encode_header(tensor);
    const std::int64_t total = kHeaderBytes + header.payload_bytes();
    std::int64_t expected;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto [it, inserted] = send_expected_.try_emplace(key_of(dst, tag), kHeaderBytes);
      expected = it->second;
      it->second = total;
    }
    auto send = std::make_shared<GlooSend>();
    if (total != expected) {
      TensorHeader notice = header;
      notice.set_kind(MessageKind::kResized);
      send->buffers.push_back(
          pack(notice, at::Tensor(), at::empty({expected}, at::TensorOptions().dtype(at::kByte))));
      std::memset(static_cast<char*>(send->buffers.back().data_ptr()) + kHeaderBytes, 0,
                  static_cast<size_t>(expected - kHeaderBytes));
    }
    send->buffers.push_back(
        pack(header, tensor, send_buffers_.take(key_of(dst, tag), at::kByte, {total})));
    for (size_t i = 0; i < send->buffers.size(); ++i) {
      std::vector<at::Tensor> one{send->buffers[i]};
      const int part_tag = tag + (send->buffers.size() == 2 && i == 1 ? 1 : 0);
      send->works.push_back(backend_->send(one, dst, part_tag));
    }
    count_messages(send->buffers.size());
    return send;
  }

  std::shared_ptr<PendingRecv> irecv(int src, int tag) override {
    auto recv = std::make_shared<GlooRecv>(this, src, tag);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& outstanding = outstanding_[key_of(src, tag)];
    // The expected size is known once the previous message of this tag has
    // been received; until then the receive is posted in wait().
    if (outstanding++ == 0) post(*recv, expected_locked(src, tag));
    return recv;
  }

  // Called by GlooRecv::wait once the message's size is known.
  void received(int src, int tag, std::int64_t total) {
    std::lock_guard<std::mutex> lock(mutex_);
    recv_expected_[key_of(src, tag)] = total;
    --outstanding_[key_of(src, tag)];
  }
  std::int64_t expected(int src, int tag) {
    std::lock_guard<std::mutex> lock(mutex_);
    return expected_locked(src, tag);
  }
  void post(GlooRecv& recv, std::int64_t bytes, int part = 0) {
    recv.buffer_ = buffers_.take(key_of(recv.src_, recv.tag_ + part), at::kByte, {bytes});
    std::vector<at::Tensor> one{recv.buffer_};
    recv.work_ = backend_->recv(one, recv.src_, recv.tag_ + part);
  }
  const at::Device& device() const { return device_; }

 private:
  std::int64_t expected_locked(int src, int tag) {
    auto it = recv_expected_.find(key_of(src, tag));
    return it == recv_expected_.end() ? kHeaderBytes : it->second;
  }

  compat::BackendPtr backend_;
  at::Device device_;
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::int64_t> send_expected_, recv_expected_;
  std::unordered_map<std::uint64_t, int> outstanding_;
  BufferCache buffers_, send_buffers_;
};

at::Tensor GlooRecv::wait(Clock::time_point deadline) {
  const std::string from = ::baton::detail::concat("rank ", src_);
  if (!work_) transport_->post(*this, transport_->expected(src_, tag_));
  if (!wait_until(work_, deadline)) return at::Tensor();
  TensorHeader header = read_header(buffer_);
  check_header(header, from);
  const std::int64_t total = kHeaderBytes + header.payload_bytes();
  if (header.kind() == MessageKind::kResized) {
    transport_->post(*this, total, /*part=*/1);
    if (!wait_until(work_, deadline)) return at::Tensor();
    header = read_header(buffer_);
    check_header(header, from);
  }
  BATON_CHECK(header.kind() == MessageKind::kInline && buffer_.numel() == total,
              "[comm.recv] message from ", from, " holds ", buffer_.numel(),
              " bytes, but its header describes ", total, " (tag collision?)");
  transport_->received(src_, tag_, total);
  at::Tensor out = unpack(buffer_, header);
  return transport_->device().is_cpu() ? out : out.to(transport_->device());
}

}  // namespace

bool wait_until(const compat::WorkPtr& work, Clock::time_point deadline) {
  using namespace std::chrono;
  // c10d reads a zero timeout as "use the default", so never pass less than 1 ms.
  const auto left = std::max(milliseconds(1), duration_cast<milliseconds>(deadline - Clock::now()));
  try {
    work->wait(left);
    return true;
  } catch (...) {
    const std::string why = first_line(std::current_exception());
    if (why.find("imed out") != std::string::npos || why.find("imeout") != std::string::npos) {
      return false;
    }
    throw;
  }
}

std::unique_ptr<Transport> make_gloo_transport(compat::BackendPtr backend, at::Device device) {
  return std::make_unique<GlooTransport>(std::move(backend), device);
}

}  // namespace baton::comm::detail
