#include "baton/comm/local_group.h"

#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "baton/core/error.h"

namespace baton::comm {

void run_local_group(int world_size, std::chrono::milliseconds timeout,
                     const std::function<void(Communicator&)>& body, TransportKind transport) {
  BATON_CHECK(world_size >= 1, "[comm.run_local_group] world size must be >= 1, got ", world_size);
  auto store = make_hash_store();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world_size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        Communicator comm = from_store(store, rank, world_size, timeout, transport);
        body(comm);
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  // The cause first: a rank's own error before the [comm] errors of the
  // ranks that waited on it.
  for (const auto& error : errors) {
    if (!error) continue;
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      if (std::string(e.what()).rfind("[comm]", 0) != 0) throw;
    } catch (...) {
      throw;
    }
  }
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace baton::comm
