#include "baton/comm/comm_state.h"
#include "baton/comm/communicator.h"
#include "baton/core/error.h"

namespace baton::comm::detail {

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
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(options.master_port);
  store_options.isServer = options.rank == 0;
  store_options.waitWorkers = false;  // the process group's rendezvous waits instead
  store_options.timeout = options.timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  } catch (...) {
    const std::string why = first_line(std::current_exception());
    if (options.rank == 0) {
      throw Error(::baton::detail::concat("[comm] rank 0 could not host the rendezvous store on ",
                                          options.master_addr, ":", options.master_port, " (", why,
                                          ")"));
    }
    throw Error(::baton::detail::concat("[comm] rank ", options.rank,
                                        " could not reach rank 0's rendezvous store at ",
                                        options.master_addr, ":", options.master_port, " within ",
                                        format_duration(options.timeout), " (", why, ")"));
  }
}

}  // namespace baton::comm::detail
