#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <c10/util/Logging.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "baton/comm/comm_state.h"
#include "baton/comm/communicator.h"
#include "baton/core/error.h"

namespace baton::comm::detail {
namespace {

bool contains(const std::string& text, const char* needle) {
  return text.find(needle) != std::string::npos;
}

// c10d logs each failed attempt to bind or connect itself (glog's "Logging
// before InitGoogleLogging" and socket.cpp lines), ahead of baton's one-line
// error that says the same. Its log macros pass only levels at or above
// caffe2_log_level, in glog and non-glog builds alike; TORCH_CPP_LOG_LEVEL,
// which only Python reads by itself, brings them back.
void quiet_c10d_logs() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* level = std::getenv("TORCH_CPP_LOG_LEVEL");
    if (level != nullptr && *level != '\0') {
      c10::initLogging();
    } else {
      ::FLAGS_caffe2_log_level = 3;  // FATAL
    }
  });
}

// A name that does not resolve fails now: c10d would retry it for the whole
// timeout. A temporary failure (EAI_AGAIN) is left to c10d's retries.
void check_resolves(const ConnectOptions& options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options.master_port);
  const int code = getaddrinfo(options.master_addr.c_str(), port.c_str(), &hints, &found);
  if (found != nullptr) freeaddrinfo(found);
  if (code == 0 || code == EAI_AGAIN) return;
  const char* why = code == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(code);
  throw Error(::baton::detail::concat(
      "[comm] rank ", options.rank, " cannot resolve the rendezvous address ", options.master_addr,
      ":", options.master_port, " (MASTER_ADDR): ", why));
}

// The TCPStore, made on a thread of its own and given up on after
// `deadline`. LibTorch 2.x's client pings the store in its constructor with
// a receive that has no timeout, so a port held by another program (which
// accepts and never answers) would block forever; the thread, detached,
// ends when that program closes the connection. Null when the deadline
// passed.
c10::intrusive_ptr<c10d::Store> make_store_within(const std::string& addr,
                                                  const c10d::TCPStoreOptions& options,
                                                  std::chrono::milliseconds deadline) {
  struct Outcome {
    std::mutex mutex;
    std::condition_variable done_changed;
    bool done = false;
    c10::intrusive_ptr<c10d::Store> store;
    // The failure as text, not as an exception_ptr: the exception object's
    // reference count lives in uninstrumented libstdc++, so whichever thread
    // dropped it last would free it in a way ThreadSanitizer cannot order.
    std::optional<std::string> error;
  };
  auto outcome = std::make_shared<Outcome>();
  std::thread([outcome, addr, options] {
    c10::intrusive_ptr<c10d::Store> store;
    std::optional<std::string> error;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(addr, options);
    } catch (...) {
      error = first_line(std::current_exception());
    }
    std::lock_guard<std::mutex> lock(outcome->mutex);
    outcome->store = std::move(store);
    outcome->error = error;
    outcome->done = true;
    outcome->done_changed.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(outcome->mutex);
  if (!outcome->done_changed.wait_for(lock, deadline, [&] { return outcome->done; })) return {};
  if (outcome->error) throw std::runtime_error(*outcome->error);
  return outcome->store;
}

}  // namespace

void check_group(int rank, int world_size, std::chrono::milliseconds timeout) {
  BATON_CHECK(world_size >= 1, "[comm.connect] world size must be >= 1, got ", world_size);
  BATON_CHECK(rank >= 0 && rank < world_size, "[comm.connect] rank must be in [0, ", world_size,
              "), got ", rank);
  BATON_CHECK(timeout.count() > 0, "[comm.connect] timeout must be positive, got ", timeout.count(),
              " ms");
}

c10::intrusive_ptr<c10d::Store> connect_store(const ConnectOptions& options) {
  check_group(options.rank, options.world_size, options.timeout);
  BATON_CHECK(options.master_port > 0 && options.master_port < 65536,
              "[comm.connect] master port must be in [1, 65535], got ", options.master_port);
  quiet_c10d_logs();
  check_resolves(options);
  // torchrun 2.x's agent already serves a store: on LibTorch 2.x every rank
  // is its client, as PyTorch's own workers are, so no second port (which
  // another program may have taken) has to be free. 1.13 cannot speak to it.
  const bool joins_agent = TORCH_VERSION_MAJOR >= 2 && options.agent_store_port != 0;
  const int port = joins_agent ? options.agent_store_port : options.master_port;
  const bool hosts = options.rank == 0 && !joins_agent;
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(port);
  store_options.isServer = hosts;
  store_options.waitWorkers = false;  // the process group's rendezvous waits instead
  store_options.timeout = options.timeout;
  // The store's own connect retries for the timeout; past it and a margin, nobody answered.
  const auto deadline = options.timeout + std::chrono::seconds(5);
  const std::string at = ::baton::detail::concat(options.master_addr, ":", port);
  const std::string whose = joins_agent ? "torchrun's agent store" : "rank 0's rendezvous store";
  try {
    c10::intrusive_ptr<c10d::Store> store =
        make_store_within(options.master_addr, store_options, deadline);
    // baton's keys get a prefix of their own in a store it shares.
    if (store && joins_agent) return c10::make_intrusive<c10d::PrefixStore>("baton", store);
    if (store) return store;
  } catch (...) {
    const std::string why = first_line(std::current_exception());
    // LibTorch 1.13 says "Address already in use", 2.x "name: EADDRINUSE".
    const bool in_use = contains(why, "Address already in use") || contains(why, "EADDRINUSE");
    if (hosts && in_use) {
      throw Error(::baton::detail::concat("[comm] rank 0 could not host the rendezvous store on ",
                                          at, ": port ", port,
                                          " is in use (set MASTER_PORT to a free port)"));
    }
    if (hosts) {
      throw Error(::baton::detail::concat("[comm] rank 0 could not host the rendezvous store on ",
                                          at, " (", why, ")"));
    }
    throw Error(::baton::detail::concat("[comm] rank ", options.rank, " could not reach ", whose,
                                        " at ", at, " within ", format_duration(options.timeout),
                                        " (", why, ")"));
  }
  throw Error(::baton::detail::concat(
      "[comm] rank ", options.rank, " got no answer from a rendezvous store at ", at, " within ",
      format_duration(deadline), " (is another program listening on that port?)"));
}

}  // namespace baton::comm::detail
