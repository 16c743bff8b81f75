#include "baton/comm/communicator.h"

#include <condition_variable>
#include <thread>
#include <utility>

#include "baton/comm/comm_state.h"
#include "baton/comm/tensor_header.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace detail {

using Clock = std::chrono::steady_clock;

struct SendState {
  std::shared_ptr<CommState> comm;
  int dst = 0;
  compat::WorkPtr header_work;
  compat::WorkPtr payload_work;
  bool waited = false;
};

// A receive in two steps: the header, then the payload it describes. With
// Gloo a helper thread posts the payload receive the moment the header lands.
struct RecvState {
  std::shared_ptr<CommState> comm;
  int src = 0;
  Tag tag;
  at::Tensor header;
  compat::WorkPtr header_work;

  std::mutex mutex;
  std::condition_variable posted_cv;
  bool posted = false;  // payload receive posted, or error set
  std::exception_ptr error;
  at::Tensor payload;
  compat::WorkPtr payload_work;
  std::thread poster;
  bool waited = false;

  // Waits for the header (up to `limit`), then posts the payload receive.
  void post_payload(std::chrono::milliseconds limit) {
    std::exception_ptr failure;
    try {
      const bool arrived = header_work->wait(limit);
      if (arrived) {
        at::Tensor payload_tensor = allocate_from_header(header.to(at::kCPU), comm->device,
                                                         ::baton::detail::concat("rank ", src));
        std::vector<at::Tensor> tensors{payload_tensor};
        compat::WorkPtr work = comm->backend->recv(tensors, src, c10d_tag(tag, Part::kPayload));
        std::lock_guard<std::mutex> lock(mutex);
        payload = std::move(payload_tensor);
        payload_work = std::move(work);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex);
    error = failure;
    posted = true;
    posted_cv.notify_all();
  }

  ~RecvState() {
    if (poster.joinable()) {
      // An abandoned receive: release the helper thread if the header never came.
      bool done;
      {
        std::lock_guard<std::mutex> lock(mutex);
        done = posted;
      }
      if (!done) header_work->abort();
      poster.join();
    }
  }
};

}  // namespace detail

using detail::Clock;
using detail::Part;

void SendHandle::wait(const std::string& what) {
  BATON_CHECK(state_ != nullptr, "[comm] wait on an empty SendHandle for ", what);
  auto& state = *state_;
  BATON_CHECK(!state.waited, "[comm] SendHandle waited twice for ", what);
  state.waited = true;
  state.comm->throw_if_failed();
  const auto deadline = Clock::now() + state.comm->timeout;
  state.comm->wait_work(state.header_work, deadline, what, state.dst);
  state.comm->wait_work(state.payload_work, deadline, what, state.dst);
}

torch::Tensor RecvHandle::wait(const std::string& what) {
  BATON_CHECK(state_ != nullptr, "[comm] wait on an empty RecvHandle for ", what);
  auto& state = *state_;
  BATON_CHECK(!state.waited, "[comm] RecvHandle waited twice for ", what);
  state.waited = true;
  auto& comm = *state.comm;
  comm.throw_if_failed();
  const auto deadline = Clock::now() + comm.timeout;
  {
    std::unique_lock<std::mutex> lock(state.mutex);
    if (!state.posted_cv.wait_until(lock, deadline, [&] { return state.posted; })) {
      lock.unlock();
      state.header_work->abort();
      comm.fail_timeout(what, state.src);
    }
  }
  if (state.poster.joinable()) state.poster.join();
  if (state.error) comm.fail(state.error, what, state.src);
  if (!state.payload_work) comm.fail_timeout(what, state.src);
  comm.wait_work(state.payload_work, deadline, what, state.src);
  return state.payload;
}

Communicator::Communicator(std::shared_ptr<detail::CommState> state) : state_(std::move(state)) {}

Communicator::~Communicator() = default;

int Communicator::rank() const { return state_->rank; }
int Communicator::world_size() const { return state_->world_size; }
std::chrono::milliseconds Communicator::timeout() const { return state_->timeout; }
std::string Communicator::backend_name() const { return state_->backend_name; }

SendHandle Communicator::isend(const torch::Tensor& tensor, int dst, const Tag& tag) {
  auto& comm = *state_;
  BATON_CHECK(tensor.defined(), "[comm.isend] rank ", comm.rank, ": undefined tensor for ",
              to_string(tag));
  BATON_CHECK(dst >= 0 && dst < comm.world_size && dst != comm.rank, "[comm.isend] rank ",
              comm.rank, ": destination must be another rank in [0, ", comm.world_size, "), got ",
              dst);
  comm.throw_if_failed();
  auto state = std::make_shared<detail::SendState>();
  state->comm = state_;
  state->dst = dst;
  std::vector<at::Tensor> header{detail::encode_header(tensor).to(comm.device)};
  std::vector<at::Tensor> payload{tensor.detach().to(comm.device).contiguous()};
  state->header_work = comm.backend->send(header, dst, detail::c10d_tag(tag, Part::kHeader));
  state->payload_work = comm.backend->send(payload, dst, detail::c10d_tag(tag, Part::kPayload));
  SendHandle handle;
  handle.state_ = std::move(state);
  return handle;
}

RecvHandle Communicator::irecv(int src, const Tag& tag) {
  auto& comm = *state_;
  BATON_CHECK(src >= 0 && src < comm.world_size && src != comm.rank, "[comm.irecv] rank ",
              comm.rank, ": source must be another rank in [0, ", comm.world_size, "), got ", src);
  comm.throw_if_failed();
  auto state = std::make_shared<detail::RecvState>();
  state->comm = state_;
  state->src = src;
  state->tag = tag;
  state->header =
      at::empty({detail::kHeaderLength}, at::TensorOptions().dtype(at::kLong).device(comm.device));
  std::vector<at::Tensor> header{state->header};
  state->header_work = comm.backend->recv(header, src, detail::c10d_tag(tag, Part::kHeader));
  if (comm.ordered_p2p) {
    state->post_payload(comm.timeout);
  } else {
    // Bounded by wait(), which aborts the header receive when it gives up.
    constexpr std::chrono::milliseconds kUntilAborted{24LL * 3600 * 1000};
    detail::RecvState* raw = state.get();
    state->poster = std::thread([raw] { raw->post_payload(kUntilAborted); });
  }
  RecvHandle handle;
  handle.state_ = std::move(state);
  return handle;
}

void Communicator::all_reduce_sum(std::vector<torch::Tensor>& tensors, const std::string& what) {
  auto& comm = *state_;
  comm.throw_if_failed();
  at::NoGradGuard no_grad;
  // One flat buffer per dtype, as Gloo reduces a list as copies of ONE tensor.
  std::vector<bool> done(tensors.size(), false);
  for (size_t first = 0; first < tensors.size(); ++first) {
    BATON_CHECK(tensors[first].defined(), "[comm.all_reduce_sum] rank ", comm.rank, ": tensor ",
                first, " is undefined");
    if (done[first]) continue;
    const auto dtype = tensors[first].scalar_type();
    std::vector<size_t> group;
    std::vector<at::Tensor> flat_parts;
    for (size_t i = first; i < tensors.size(); ++i) {
      if (done[i] || !tensors[i].defined() || tensors[i].scalar_type() != dtype) continue;
      done[i] = true;
      group.push_back(i);
      flat_parts.push_back(tensors[i].detach().reshape({-1}).to(comm.device));
    }
    std::vector<at::Tensor> flat{at::cat(flat_parts)};
    const auto deadline = Clock::now() + comm.timeout;
    comm.wait_work(comm.backend->allreduce(flat), deadline, what, -1);
    int64_t offset = 0;
    for (size_t i : group) {
      const int64_t n = tensors[i].numel();
      tensors[i].copy_(flat[0].narrow(0, offset, n).view(tensors[i].sizes()));
      offset += n;
    }
  }
}

void Communicator::barrier(const std::string& what) {
  auto& comm = *state_;
  comm.throw_if_failed();
  const auto deadline = Clock::now() + comm.timeout;
  comm.wait_work(comm.backend->barrier(), deadline, what, -1);
}

}  // namespace baton::comm
