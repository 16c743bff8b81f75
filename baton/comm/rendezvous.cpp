#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <c10/util/Logging.h>

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
  throw Error(::baton::detail::concat("[comm] rank ", options.rank,
                                      " cannot resolve the rendezvous address ",
                                      options.master_addr, ":", options.master_port,
                                      " (MASTER_ADDR): ", why));
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
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = options.rank == 0;
  store_options.waitWorkers = false;  // the process group's rendezvous waits instead
  store_options.timeout = options.timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  } catch (...) {
    const std::string why = first_line(std::current_exception());
    const std::string at =
        ::baton::detail::concat(options.master_addr, ":", options.master_port);
    // LibTorch 1.13 says "Address already in use", 2.x "name: EADDRINUSE".
    const bool in_use = contains(why, "Address already in use") || contains(why, "EADDRINUSE");
    if (options.rank == 0 && in_use) {
      throw Error(::baton::detail::concat("[comm] rank 0 could not host the rendezvous store on ",
                                          at, ": port ", options.master_port,
                                          " is in use (set MASTER_PORT to a free port)"));
    }
    if (options.rank == 0) {
      throw Error(::baton::detail::concat("[comm] rank 0 could not host the rendezvous store on ",
                                          at, " (", why, ")"));
    }
    throw Error(::baton::detail::concat("[comm] rank ", options.rank,
                                        " could not reach rank 0's rendezvous store at ", at,
                                        " within ", format_duration(options.timeout), " (", why,
                                        ")"));
  }
}

}  // namespace baton::comm::detail
