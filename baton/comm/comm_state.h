// Internals shared by the Communicator, its handles and its factories.
#pragma once

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "baton/comm/c10d_compat.h"
#include "baton/comm/transport.h"

namespace baton::comm::detail {

struct CommState {
  CommState(compat::BackendPtr backend, c10::intrusive_ptr<c10d::Store> store, int rank,
            int world_size, std::chrono::milliseconds timeout, at::Device device,
            std::string backend_name);

  compat::BackendPtr backend;
  c10::intrusive_ptr<c10d::Store> store;  // rank 0's TCPStore server lives here
  const int rank;
  const int world_size;
  const std::chrono::milliseconds timeout;
  const at::Device device;  // where sent and received tensors live
  const std::string backend_name;
  // Point-to-point: the transports, and the one each peer uses (null for
  // this rank). Declared after `backend`, which they use, so they go first.
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<Transport*> p2p;
  // Where Gloo groups of this communicator's ranks connect (new_group); null
  // only if the factory made none.
  std::shared_ptr<::gloo::transport::Device> gloo_device;
  // A group made by new_group(): its members' world ranks and its name
  // ("dp group of ranks 0, 2"), which errors name. Empty for the world.
  std::vector<int> members;
  std::string group_name;
  int groups_made = 0;  // new_group() calls so far: each group's store prefix

  // This rank as errors name it: its world rank.
  int world_rank() const { return members.empty() ? rank : members[static_cast<size_t>(rank)]; }

  // Throws the first failure again, so a broken communicator fails fast.
  void throw_if_failed() const;

  // Waits for `work` until `deadline`; on failure records it and throws
  // baton::Error naming `what` and `peer` (-1 for collectives).
  void wait_work(const compat::WorkPtr& work, std::chrono::steady_clock::time_point deadline,
                 const std::string& what, int peer);

  // Records `error` as the communicator's failure (the first one wins) and
  // throws baton::Error with a message naming what waited and why it failed.
  [[noreturn]] void fail(std::exception_ptr error, const std::string& what, int peer);
  [[noreturn]] void fail_timeout(const std::string& what, int peer);

 private:
  mutable std::mutex mutex_;
  std::string failure_;
};

// "5 s", "2.5 s", "300 ms".
std::string format_duration(std::chrono::milliseconds duration);

// The first line of an exception's message, without c10's backtrace.
std::string first_line(std::exception_ptr error);

}  // namespace baton::comm::detail

namespace baton::comm {
struct ConnectOptions;
}

namespace baton::comm::detail {

// Throws baton::Error unless 0 <= rank < world_size and timeout > 0.
void check_group(int rank, int world_size, std::chrono::milliseconds timeout);

// Rank 0 hosts a TCPStore on options.master_port; the others connect to it,
// retrying until options.timeout. Throws baton::Error naming the address.
c10::intrusive_ptr<c10d::Store> connect_store(const ConnectOptions& options);

}  // namespace baton::comm::detail
