#include "baton/comm/communicator.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "baton/comm/comm_state.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace detail {

struct SendState {
  std::shared_ptr<CommState> comm;
  int dst = 0;
  std::shared_ptr<PendingSend> pending;
  bool waited = false;
};

struct ReduceState {
  std::shared_ptr<CommState> comm;
  std::string what;
  std::vector<at::Tensor> tensors;  // the caller's, written at wait()
  // Where the caller's first tensor starts in its flat buffer (a
  // reduce-scatter done as an all-reduce keeps this rank's part only).
  int64_t first_offset = 0;
  // A reduce-scatter's input parts, alive until the backend is done with them.
  std::vector<std::vector<at::Tensor>> inputs_alive;
  // Per dtype: the indices of its tensors and their flat buffer being reduced.
  std::vector<std::vector<size_t>> groups;
  std::vector<std::vector<at::Tensor>> flats;
  std::vector<compat::WorkPtr> works;  // null where the sum is already done
  bool waited = false;
  // Per group: when its sum finished, ns on the steady clock (0: not yet
  // known). Set at once for sums done at once, else by the work's completion
  // callback (on c10d's threads) or, where it has not run, by wait().
  std::vector<std::shared_ptr<std::atomic<std::int64_t>>> finished_ns;
};

struct GatherState {
  std::shared_ptr<CommState> comm;
  std::string what;
  std::vector<std::vector<at::Tensor>> outputs;  // [0][rank]
  std::vector<at::Tensor> inputs;
  compat::WorkPtr work;  // null for a communicator of one rank
  bool waited = false;
};

struct RecvState {
  std::shared_ptr<CommState> comm;
  int src = 0;
  std::shared_ptr<PendingRecv> pending;
  bool waited = false;
};

}  // namespace detail

using detail::Clock;

namespace {

// Notes `at` as the finish time unless one is noted already (the first
// notice is the earliest: a callback's, before wait() saw the work done).
void note_finished(std::atomic<std::int64_t>& finished, Clock::time_point at) {
  std::int64_t unset = 0;
  finished.compare_exchange_strong(
      unset, std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count(),
      std::memory_order_acq_rel);
}

}  // namespace

void SendHandle::wait(const std::string& what) {
  BATON_CHECK(state_ != nullptr, "[comm] wait on an empty SendHandle for ", what);
  auto& state = *state_;
  BATON_CHECK(!state.waited, "[comm] SendHandle waited twice for ", what);
  state.waited = true;
  auto& comm = *state.comm;
  comm.throw_if_failed();
  bool done = false;
  try {
    done = state.pending->wait(Clock::now() + comm.timeout);
  } catch (...) {
    comm.fail(std::current_exception(), what, state.dst);
  }
  if (!done) comm.fail_timeout(what, state.dst);
  state.pending.reset();
}

torch::Tensor RecvHandle::wait(const std::string& what) {
  return wait_described([&what] { return what; });
}

torch::Tensor RecvHandle::wait_described(const std::function<std::string()>& describe) {
  BATON_CHECK(state_ != nullptr, "[comm] wait on an empty RecvHandle for ", describe());
  auto& state = *state_;
  BATON_CHECK(!state.waited, "[comm] RecvHandle waited twice for ", describe());
  state.waited = true;
  auto& comm = *state.comm;
  comm.throw_if_failed();
  at::Tensor tensor;
  try {
    tensor = state.pending->wait(Clock::now() + comm.timeout);
  } catch (const Error&) {
    throw;  // a malformed message: already one line naming the peer
  } catch (...) {
    comm.fail(std::current_exception(), describe(), state.src);
  }
  if (!tensor.defined()) comm.fail_timeout(describe(), state.src);
  state.pending.reset();
  return tensor;
}

Communicator::Communicator(std::shared_ptr<detail::CommState> state) : state_(std::move(state)) {}

Communicator::~Communicator() = default;

int Communicator::rank() const {
  return state_->rank;
}
int Communicator::world_size() const {
  return state_->world_size;
}
std::chrono::milliseconds Communicator::timeout() const {
  return state_->timeout;
}
std::string Communicator::backend_name() const {
  return state_->backend_name;
}

std::uint64_t Communicator::p2p_messages_sent() const {
  std::uint64_t n = 0;
  for (const auto& transport : state_->transports) {
    if (transport) n += transport->messages_sent();
  }
  return n;
}

SendHandle Communicator::isend(const torch::Tensor& tensor, int dst, const Tag& tag) {
  auto& comm = *state_;
  BATON_CHECK(tensor.defined(), "[comm.isend] rank ", comm.rank, ": undefined tensor for ",
              to_string(tag));
  BATON_CHECK(dst >= 0 && dst < comm.world_size && dst != comm.rank, "[comm.isend] rank ",
              comm.rank, ": destination must be another rank in [0, ", comm.world_size, "), got ",
              dst);
  BATON_CHECK(comm.p2p[dst] != nullptr, "[comm.isend] rank ", comm.world_rank(), ": the ",
              comm.group_name, " carries collectives only, not point-to-point");
  comm.throw_if_failed();
  const int c10d = detail::c10d_tag(tag, detail::Part::kMessage);
  auto state = std::make_shared<detail::SendState>();
  state->comm = state_;
  state->dst = dst;
  try {
    // Each of detach() and to() is a dispatcher call (thousands of
    // instructions on a 4 KiB message): skip them when they would change nothing.
    at::Tensor payload = tensor.requires_grad() ? tensor.detach() : tensor;
    if (payload.device() != comm.device) payload = payload.to(comm.device);
    state->pending = comm.p2p[dst]->isend(payload.contiguous(), dst, c10d);
  } catch (const Error&) {
    throw;
  } catch (...) {
    comm.fail(std::current_exception(), ::baton::detail::concat("the send of ", to_string(tag)),
              dst);
  }
  SendHandle handle;
  handle.state_ = std::move(state);
  return handle;
}

RecvHandle Communicator::irecv(int src, const Tag& tag) {
  auto& comm = *state_;
  BATON_CHECK(src >= 0 && src < comm.world_size && src != comm.rank, "[comm.irecv] rank ",
              comm.rank, ": source must be another rank in [0, ", comm.world_size, "), got ", src);
  BATON_CHECK(comm.p2p[src] != nullptr, "[comm.irecv] rank ", comm.world_rank(), ": the ",
              comm.group_name, " carries collectives only, not point-to-point");
  comm.throw_if_failed();
  auto state = std::make_shared<detail::RecvState>();
  state->comm = state_;
  state->src = src;
  state->pending = comm.p2p[src]->irecv(src, detail::c10d_tag(tag, detail::Part::kMessage));
  RecvHandle handle;
  handle.state_ = std::move(state);
  return handle;
}

std::string Communicator::transport_name(int peer) const {
  BATON_CHECK(peer >= 0 && peer < state_->world_size && peer != state_->rank,
              "[comm.transport_name] peer must be another rank in [0, ", state_->world_size,
              "), got ", peer);
  return state_->p2p[peer] != nullptr ? state_->p2p[peer]->name() : "none";
}

void Communicator::all_reduce_sum(std::vector<torch::Tensor>& tensors, const std::string& what) {
  all_reduce_sum_async(tensors, what).wait();
}

ReduceHandle Communicator::all_reduce_sum_async(std::vector<torch::Tensor> tensors,
                                                const std::string& what) {
  auto& comm = *state_;
  comm.throw_if_failed();
  at::NoGradGuard no_grad;
  auto state = std::make_shared<detail::ReduceState>();
  state->comm = state_;
  state->what = what;
  if (comm.world_size == 1) {  // a sum over one rank: the tensors as they are
    for (size_t i = 0; i < tensors.size(); ++i) {
      BATON_CHECK(tensors[i].defined(), "[comm.all_reduce_sum] rank ", comm.world_rank(),
                  ": tensor ", i, " is undefined");
    }
    ReduceHandle handle;
    handle.state_ = std::move(state);
    return handle;
  }
  // One flat buffer per dtype, as Gloo reduces a list as copies of ONE tensor.
  std::vector<bool> done(tensors.size(), false);
  for (size_t first = 0; first < tensors.size(); ++first) {
    BATON_CHECK(tensors[first].defined(), "[comm.all_reduce_sum] rank ", comm.world_rank(),
                ": tensor ", first, " is undefined");
    if (done[first]) continue;
    const auto dtype = tensors[first].scalar_type();
    std::vector<size_t> group;
    std::vector<at::Tensor> flat_parts;
    for (size_t i = first; i < tensors.size(); ++i) {
      if (done[i] || !tensors[i].defined() || tensors[i].scalar_type() != dtype) continue;
      done[i] = true;
      group.push_back(i);
      // bf16 and fp16 sum in fp32: Gloo has no kernel for them, and the sum is
      // more exact (wait() copies it back into the tensor's own dtype).
      const bool widen = dtype == at::kBFloat16 || dtype == at::kHalf;
      flat_parts.push_back(
          tensors[i].detach().reshape({-1}).to(comm.device, widen ? at::kFloat : dtype));
    }
    std::vector<at::Tensor> flat{at::cat(flat_parts)};
    compat::WorkPtr work;
    auto finished = std::make_shared<std::atomic<std::int64_t>>(0);
    if (comm.world_size > 1 && small_on_one_host(flat[0])) {
      flat[0] = reduce_through_rank0(flat[0], what);
      note_finished(*finished, Clock::now());
    } else {
      try {
        work = comm.backend->allreduce(flat);
      } catch (...) {
        comm.fail(std::current_exception(), what, -1);
      }
      compat::on_completion(work, [finished] { note_finished(*finished, Clock::now()); });
    }
    state->finished_ns.push_back(std::move(finished));
    state->groups.push_back(std::move(group));
    state->flats.push_back(std::move(flat));
    state->works.push_back(std::move(work));
  }
  state->tensors = std::move(tensors);
  ReduceHandle handle;
  handle.state_ = std::move(state);
  return handle;
}

void ReduceHandle::wait() {
  BATON_CHECK(state_ != nullptr, "[comm] wait on an empty ReduceHandle");
  auto& state = *state_;
  BATON_CHECK(!state.waited, "[comm] ReduceHandle waited twice for ", state.what);
  state.waited = true;
  auto& comm = *state.comm;
  at::NoGradGuard no_grad;
  const auto deadline = Clock::now() + comm.timeout;
  for (size_t g = 0; g < state.groups.size(); ++g) {
    if (state.works[g]) {
      comm.wait_work(state.works[g], deadline, state.what, -1);
      // Its callback may not have run yet: the sum is done by now in any case.
      note_finished(*state.finished_ns[g], Clock::now());
    }
    const at::Tensor& flat = state.flats[g][0];
    int64_t offset = state.first_offset;
    for (size_t i : state.groups[g]) {
      at::Tensor& t = state.tensors[i];
      const int64_t n = t.numel();
      t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
      offset += n;
    }
  }
  state.flats.clear();
  state.tensors.clear();
  state.inputs_alive.clear();
}

Clock::time_point ReduceHandle::finished_at() const {
  BATON_CHECK(state_ != nullptr && state_->waited,
              "[comm] finished_at before wait on a ReduceHandle");
  std::int64_t ns = 0;
  for (const auto& finished : state_->finished_ns)
    ns = std::max(ns, finished->load(std::memory_order_acquire));
  return Clock::time_point(std::chrono::nanoseconds(ns));
}

bool Communicator::has_reduce_scatter() const {
  return compat::kGlooReduceScatter && state_->world_size > 1;
}

ReduceHandle Communicator::reduce_scatter_sum_async(const torch::Tensor& input,
                                                    torch::Tensor output, const std::string& what) {
  auto& comm = *state_;
  comm.throw_if_failed();
  at::NoGradGuard no_grad;
  const int n = comm.world_size;
  BATON_CHECK(input.defined() && output.defined() && input.dim() == 1 &&
                  input.numel() == n * output.numel() &&
                  input.scalar_type() == output.scalar_type(),
              "[comm.reduce_scatter] rank ", comm.world_rank(), ": the input must be flat with ", n,
              " times the output's elements and its dtype (got ", input.numel(), " and ",
              output.numel(), ")");
  const at::Tensor flat = input.to(comm.device).contiguous();
  // Small messages among ranks of one host, and LibTorch 1.13's Gloo (no
  // reduce-scatter): an all-reduce of the whole, of which wait() keeps this
  // rank's part (exact; an all-reduce's traffic).
  if (n == 1 || !compat::kGlooReduceScatter || small_on_one_host(flat)) {
    ReduceHandle handle = all_reduce_sum_async({flat}, what);
    handle.state_->tensors = {output};
    handle.state_->first_offset = static_cast<int64_t>(comm.rank) * output.numel();
    return handle;
  }
  auto state = std::make_shared<detail::ReduceState>();
  state->comm = state_;
  state->what = what;
  std::vector<at::Tensor> parts;
  const int64_t c = output.numel();
  for (int r = 0; r < n; ++r) parts.push_back(flat.narrow(0, r * c, c));
  std::vector<std::vector<at::Tensor>> inputs{parts};
  std::vector<at::Tensor> sums{at::empty({c}, flat.options())};
  compat::WorkPtr work;
  auto finished = std::make_shared<std::atomic<std::int64_t>>(0);
  try {
    work = comm.backend->reduce_scatter(sums, inputs);
  } catch (...) {
    comm.fail(std::current_exception(), what, -1);
  }
  compat::on_completion(work, [finished] { note_finished(*finished, Clock::now()); });
  state->finished_ns.push_back(std::move(finished));
  state->groups.push_back({0});
  state->flats.push_back(std::move(sums));
  state->works.push_back(std::move(work));
  state->inputs_alive = std::move(inputs);
  state->tensors = {output};
  ReduceHandle handle;
  handle.state_ = std::move(state);
  return handle;
}

GatherHandle Communicator::all_gather_async(const torch::Tensor& tensor, const std::string& what) {
  auto& comm = *state_;
  comm.throw_if_failed();
  at::NoGradGuard no_grad;
  BATON_CHECK(tensor.defined(), "[comm.all_gather] rank ", comm.world_rank(),
              ": the tensor is undefined");
  auto state = std::make_shared<detail::GatherState>();
  state->comm = state_;
  state->what = what;
  const at::Tensor flat = tensor.detach().reshape({-1}).to(comm.device).contiguous();
  state->inputs = {flat};
  if (comm.world_size > 1) {
    state->outputs.emplace_back();
    for (int r = 0; r < comm.world_size; ++r) state->outputs[0].push_back(at::empty_like(flat));
    try {
      state->work = comm.backend->allgather(state->outputs, state->inputs);
    } catch (...) {
      comm.fail(std::current_exception(), what, -1);
    }
  } else {
    state->outputs = {{flat}};
  }
  GatherHandle handle;
  handle.state_ = std::move(state);
  return handle;
}

std::vector<torch::Tensor> GatherHandle::wait() {
  BATON_CHECK(state_ != nullptr, "[comm] wait on an empty GatherHandle");
  auto& state = *state_;
  BATON_CHECK(!state.waited, "[comm] GatherHandle waited twice for ", state.what);
  state.waited = true;
  auto& comm = *state.comm;
  if (state.work) comm.wait_work(state.work, Clock::now() + comm.timeout, state.what, -1);
  std::vector<torch::Tensor> out = std::move(state.outputs[0]);
  state.outputs.clear();
  state.inputs.clear();
  return out;
}

bool Communicator::small_on_one_host(const torch::Tensor& flat) const {
  constexpr int64_t kSmallBytes = 64 << 10;
  if (flat.nbytes() > static_cast<size_t>(kSmallBytes) || !flat.device().is_cpu()) return false;
  for (int r = 0; r < state_->world_size; ++r) {
    if (r == state_->rank) continue;
    if (state_->p2p[r] == nullptr || std::string_view(state_->p2p[r]->name()) != "shm")
      return false;
  }
  return true;
}

torch::Tensor Communicator::reduce_through_rank0(const torch::Tensor& flat,
                                                 const std::string& what) {
  // Two hops through shared memory instead of Gloo's rounds over TCP: every
  // rank sends to rank 0, which adds in rank order (so every rank gets the
  // same bits) and sends the sum back.
  const Tag up{kMaxStages - 1, kMaxMicrobatches - 3, Direction::kForward};
  const Tag down{kMaxStages - 1, kMaxMicrobatches - 3, Direction::kBackward};
  const int n = state_->world_size;
  if (rank() != 0) {
    RecvHandle result = irecv(0, down);
    isend(flat, 0, up).wait(what + " (to rank 0)");
    return result.wait(what + " (from rank 0)");
  }
  std::vector<RecvHandle> parts;
  for (int r = 1; r < n; ++r) parts.push_back(irecv(r, up));
  torch::Tensor sum = flat.clone();
  for (int r = 1; r < n; ++r)
    sum += parts[static_cast<size_t>(r - 1)].wait(what + " (from rank " + std::to_string(r) + ")");
  std::vector<SendHandle> sends;
  for (int r = 1; r < n; ++r) sends.push_back(isend(sum, r, down));
  for (int r = 1; r < n; ++r)
    sends[static_cast<size_t>(r - 1)].wait(what + " (to rank " + std::to_string(r) + ")");
  return sum;
}

void Communicator::barrier(const std::string& what) {
  auto& comm = *state_;
  comm.throw_if_failed();
  if (comm.world_size == 1) return;
  const torch::Tensor token = torch::zeros({1});
  if (small_on_one_host(token)) {
    // Every rank on this host over shared memory: two hops through rank 0,
    // whose waits spin as a pipeline's receives do, instead of Gloo's TCP
    // rounds, which sleep. A rank that slept in the barrier starts the next
    // step with cold caches: measured, the first forward and backward of the
    // step after a Gloo barrier took 110-150 µs against 50-90 µs in the steps
    // without one (hidden 16, bench/RESULTS.md "Efficiency at hidden 16: where
    // the last points went").
    const Tag up{kMaxStages - 1, kMaxMicrobatches - 4, Direction::kForward};
    const Tag down{kMaxStages - 1, kMaxMicrobatches - 4, Direction::kBackward};
    if (rank() != 0) {
      RecvHandle released = irecv(0, down);
      isend(token, 0, up).wait(what + " (to rank 0)");
      released.wait(what + " (from rank 0)");
      return;
    }
    std::vector<RecvHandle> arrived;
    for (int r = 1; r < comm.world_size; ++r) arrived.push_back(irecv(r, up));
    for (int r = 1; r < comm.world_size; ++r)
      arrived[static_cast<size_t>(r - 1)].wait(what + " (from rank " + std::to_string(r) + ")");
    std::vector<SendHandle> releases;
    for (int r = 1; r < comm.world_size; ++r) releases.push_back(isend(token, r, down));
    for (int r = 1; r < comm.world_size; ++r)
      releases[static_cast<size_t>(r - 1)].wait(what + " (to rank " + std::to_string(r) + ")");
    return;
  }
  const auto deadline = Clock::now() + comm.timeout;
  comm.wait_work(comm.backend->barrier(), deadline, what, -1);
}

}  // namespace baton::comm
