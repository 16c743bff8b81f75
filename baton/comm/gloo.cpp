// Gloo-backed communicators: connect() over a TCPStore, from_store() over a
// caller's store.
#include <cstdlib>
#include <utility>

#include "baton/comm/comm_state.h"
#include "baton/comm/communicator.h"
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

Communicator make_gloo(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                       std::chrono::milliseconds timeout,
                       std::shared_ptr<::gloo::transport::Device> device) {
  store->setTimeout(timeout);
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(std::move(device));
  compat::BackendPtr backend;
  try {
    backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
  } catch (...) {
    const std::string why = detail::first_line(std::current_exception());
    const bool timed_out =
        why.find("imeout") != std::string::npos || why.find("imed out") != std::string::npos;
    BATON_CHECK(!timed_out, "[comm] rank ", rank, " timed out after ",
                detail::format_duration(timeout), " waiting for the other ", world_size - 1,
                " rank(s) to join the process group (", why, ")");
    throw Error(::baton::detail::concat("[comm] rank ", rank,
                                        " could not join the process group of ", world_size,
                                        " ranks: ", why));
  }
  return Communicator(std::make_shared<detail::CommState>(
      std::move(backend), std::move(store), rank, world_size, timeout, at::Device(at::kCPU),
      /*ordered_p2p=*/false, "gloo"));
}

}  // namespace

Communicator connect(const ConnectOptions& options) {
  auto store = detail::connect_store(options);
  return make_gloo(std::move(store), options.rank, options.world_size, options.timeout,
                   make_device(options.master_addr));
}

Communicator from_store(c10::intrusive_ptr<c10d::Store> store, int rank, int world_size,
                        std::chrono::milliseconds timeout) {
  detail::check_group(rank, world_size, timeout);
  BATON_CHECK(store, "[comm.from_store] store is null");
  return make_gloo(std::move(store), rank, world_size, timeout, make_device("127.0.0.1"));
}

c10::intrusive_ptr<c10d::Store> make_hash_store() { return c10::make_intrusive<c10d::HashStore>(); }

}  // namespace baton::comm
