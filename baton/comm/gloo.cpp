// Gloo-backed communicators: connect() over a TCPStore, from_store() over a
// caller's store.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <utility>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "baton/comm/comm_state.h"
#include "baton/comm/communicator.h"
#include "baton/comm/gloo_transport.h"
#include "baton/comm/host_identity.h"
#include "baton/comm/huge_pages.h"
#include "baton/comm/shm_transport.h"
#include "baton/core/error.h"

namespace baton::comm {
namespace {

bool is_loopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::shared_ptr<::gloo::transport::Device> make_device(const std::string& master_addr) {
  if (is_loopback(master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Picks each peer's point-to-point transport (see TransportKind).
void add_transports(detail::CommState& comm, TransportKind kind) {
  std::vector<bool> same_host(static_cast<size_t>(comm.world_size), false);
  if (kind != TransportKind::kGloo) {
    same_host = detail::same_host_ranks(*comm.store, "baton/host/", comm.rank, comm.world_size);
    if (kind == TransportKind::kShm) {
      for (int r = 0; r < comm.world_size; ++r) {
        BATON_CHECK(same_host[r], "[comm] rank ", comm.rank,
                    ": --transport shm needs every rank on this host, but rank ", r,
                    " is on another (use --transport auto or gloo)");
      }
    }
  }
  std::vector<bool> shm_peers = same_host;
  shm_peers[comm.rank] = false;
  const bool any_shm = std::find(shm_peers.begin(), shm_peers.end(), true) != shm_peers.end();
  comm.transports.push_back(detail::make_gloo_transport(comm.backend, comm.device));
  detail::Transport* gloo = comm.transports.back().get();
  detail::Transport* shm = nullptr;
  if (any_shm) {
    // Large payloads cross by one copy out of the sender's buffer, at twice
    // the speed when that buffer is on huge pages (huge_pages.h).
    install_huge_page_allocator(HugePageOptions::from_env());
    comm.transports.push_back(
        detail::make_shm_transport(*comm.store, "baton/shm/", comm.rank, comm.world_size, shm_peers,
                                   comm.backend, comm.timeout, detail::ShmOptions::from_env()));
    shm = comm.transports.back().get();
  }
  for (int r = 0; r < comm.world_size; ++r) {
    if (r != comm.rank) comm.p2p[r] = shm_peers[r] ? shm : gloo;
  }
}

// Returns once every rank of `state`'s group has finished joining: Gloo
// connects each pair from both ends, and a rank that returned and closed its
// pairs at once (a body with nothing to send) broke a slower peer's join
// with "Connection closed by peer" (seen in comm_communicator_test).
void wait_until_all_joined(detail::CommState& state) {
  state.wait_work(state.backend->barrier(), std::chrono::steady_clock::now() + state.timeout,
                  "joining the " + (state.group_name.empty() ? "process group" : state.group_name),
                  -1);
}

// `store_at` ("host:port", or empty for a caller's store) is named in errors.
Communicator make_gloo(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                       std::chrono::milliseconds timeout,
                       std::shared_ptr<::gloo::transport::Device> device, TransportKind kind,
                       const std::string& store_at) {
  store->setTimeout(timeout);
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(std::move(device));
  compat::BackendPtr backend;
  try {
    backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
  } catch (...) {
    const std::string why = detail::first_line(std::current_exception());
    const std::string through = store_at.empty() ? "" : " through the store at " + store_at;
    const bool timed_out =
        why.find("imeout") != std::string::npos || why.find("imed out") != std::string::npos;
    BATON_CHECK(!timed_out, "[comm] rank ", rank, " timed out after ",
                detail::format_duration(timeout), " waiting for the other ", world_size - 1,
                " rank(s) to join the process group", through, " (", why, ")");
    throw Error(::baton::detail::concat("[comm] rank ", rank,
                                        " could not join the process group of ", world_size,
                                        " ranks", through, ": ", why));
  }
  auto state =
      std::make_shared<detail::CommState>(std::move(backend), std::move(store), rank, world_size,
                                          timeout, at::Device(at::kCPU), "gloo");
  state->gloo_device = options->devices.front();
  wait_until_all_joined(*state);
  add_transports(*state, kind);
  return Communicator(std::move(state));
}

}  // namespace

Communicator connect(const ConnectOptions& options) {
  auto store = detail::connect_store(options);
  return make_gloo(std::move(store), options.rank, options.world_size, options.timeout,
                   make_device(options.master_addr), options.transport,
                   ::baton::detail::concat(options.master_addr, ":", options.master_port));
}

Communicator from_store(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                        std::chrono::milliseconds timeout, TransportKind transport) {
  detail::check_group(rank, world_size, timeout);
  BATON_CHECK(store, "[comm.from_store] store is null");
  return make_gloo(std::move(store), rank, world_size, timeout, make_device("127.0.0.1"), transport,
                   "");
}

Communicator Communicator::new_group(const std::vector<int>& members, const std::string& kind) {
  auto& world = *state_;
  world.throw_if_failed();
  BATON_CHECK(world.members.empty(), "[comm.new_group] rank ", world.world_rank(),
              ": cannot make a group inside the ", world.group_name);
  if (world.world_size == 1 && members == std::vector<int>{0}) {
    return Communicator(
        std::make_shared<detail::CommState>(compat::BackendPtr(), c10::intrusive_ptr<c10d::Store>(),
                                            0, 1, world.timeout, at::Device(at::kCPU), "solo"));
  }
  BATON_CHECK(world.gloo_device != nullptr, "[comm.new_group] rank ", world.rank,
              ": this communicator has no Gloo device to build groups on");
  std::string list;
  int index = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    const int r = members[i];
    BATON_CHECK(r >= 0 && r < world.world_size && (i == 0 || r > members[i - 1]),
                "[comm.new_group] rank ", world.rank, ": ", kind,
                " group members must be ascending ranks in [0, ", world.world_size, "), got ", r,
                " at position ", i);
    if (r == world.rank) index = static_cast<int>(i);
    list += (i ? ", " : "") + std::to_string(r);
  }
  BATON_CHECK(index >= 0, "[comm.new_group] rank ", world.rank, " is not a member of the ", kind,
              " group of ranks ", list.empty() ? std::string("(none)") : list);
  const std::string name = kind + " group of ranks " + list;
  // The n-th group a rank makes; its members make theirs in the same order.
  const std::string prefix =
      ::baton::detail::concat("baton/group/", world.groups_made++, "/", kind, "/", list, "/");
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, world.store);
  auto options = c10d::ProcessGroupGloo::Options::create(world.timeout);
  options->devices.push_back(world.gloo_device);
  const int size = static_cast<int>(members.size());
  compat::BackendPtr backend;
  try {
    backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, index, size, options);
  } catch (...) {
    throw Error(::baton::detail::concat("[comm] rank ", world.rank, " could not join the ", name,
                                        " within ", detail::format_duration(world.timeout), ": ",
                                        detail::first_line(std::current_exception())));
  }
  auto state = std::make_shared<detail::CommState>(std::move(backend), store, index, size,
                                                   world.timeout, at::Device(at::kCPU), "gloo");
  state->gloo_device = world.gloo_device;
  state->members = members;
  state->group_name = name;
  wait_until_all_joined(*state);
  return Communicator(std::move(state));
}

c10::intrusive_ptr<c10d::Store> make_hash_store() {
  return c10::make_intrusive<c10d::HashStore>();
}

}  // namespace baton::comm
