// comm_peer: one rank of the multi-process tests in process_test.cpp. Reads
// its place from the torchrun environment and runs one scenario:
//   ping  - every rank sends its rank to the next one, receives from the
//           previous one, and all ranks all-reduce; prints "ok" on success.
//   die   - rank 0 kills itself (SIGKILL) while rank 1 waits for a tensor
//           from it; rank 1 reports the error and exits 2.
//   inbox - rank 0 of 2 joins the TCPStore at MASTER_ADDR:MASTER_PORT (a
//           client: the test hosts it) and sets up its shared-memory
//           transport under "inbox-test/", where rank 1 never shows up: it
//           holds its inbox, waiting for its peer's, until killed.
// Usage: comm_peer ping|die|inbox [timeout_ms] [auto|shm|gloo]; the transport
// also goes to stdout ("transport shm") so tests can check which one ran.
// Any baton::Error is printed as one line on stderr with exit code 2.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include <torch/torch.h>

#include "baton/comm/communicator.h"
#include "baton/comm/rank_env.h"
#include "baton/comm/shm_transport.h"
#include "baton/core/error.h"

namespace {

using namespace baton::comm;

void ping(Communicator& comm) {
  const int next = (comm.rank() + 1) % comm.world_size();
  const int prev = (comm.rank() + comm.world_size() - 1) % comm.world_size();
  RecvHandle recv = comm.irecv(prev, Tag{prev, 0, Direction::kForward});
  SendHandle send =
      comm.isend(torch::full({2, 2}, comm.rank()), next, Tag{comm.rank(), 0, Direction::kForward});
  const torch::Tensor got = recv.wait("RECV_F from rank " + std::to_string(prev));
  send.wait("SEND_F to rank " + std::to_string(next));
  BATON_CHECK(torch::equal(got, torch::full({2, 2}, prev)), "[comm_peer] wrong tensor from rank ",
              prev);
  std::vector<torch::Tensor> sum{torch::ones({3}) * comm.rank()};
  comm.all_reduce_sum(sum);
  const int n = comm.world_size();
  BATON_CHECK(sum[0].equal(torch::ones({3}) * (n * (n - 1) / 2)), "[comm_peer] wrong sum");
  std::cout << "ok from rank " << comm.rank() << std::endl;
}

void die(Communicator& comm) {
  comm.barrier();
  if (comm.rank() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(getpid(), SIGKILL);
  }
  comm.irecv(0, Tag{0, 0, Direction::kForward}).wait("stage 1 micro-batch 0 RECV_F from rank 0");
}

void hold_inbox(const RankEnv& env, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = false;
  options.timeout = timeout;
  c10d::TCPStore store(env.master_addr, options);
  baton::comm::detail::make_shm_transport(store, "inbox-test/", 0, 2, {false, true}, {}, timeout,
                                          baton::comm::detail::ShmOptions());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const int timeout_ms = argc > 2 ? std::stoi(argv[2]) : 10000;
  const std::string transport = argc > 3 ? argv[3] : "auto";
  try {
    const auto env = rank_env_from_environment();
    BATON_CHECK(env.has_value(), "[comm_peer] RANK and WORLD_SIZE are not set");
    if (scenario == "inbox") {
      hold_inbox(*env, std::chrono::milliseconds(timeout_ms));
      return 0;
    }
    Communicator comm = connect(ConnectOptions()
                                    .set_rank(env->rank)
                                    .set_world_size(env->world_size)
                                    .set_master_addr(env->master_addr)
                                    .set_master_port(env->master_port)
                                    .set_timeout(std::chrono::milliseconds(timeout_ms))
                                    .set_transport(parse_transport(transport)));
    std::cout << "transport " << comm.transport_name((comm.rank() + 1) % comm.world_size())
              << std::endl;
    if (scenario == "ping") {
      ping(comm);
    } else if (scenario == "die") {
      die(comm);
    } else {
      std::cerr << "usage: comm_peer ping|die|inbox [timeout_ms] [auto|shm|gloo]" << std::endl;
      return 64;
    }
  } catch (const baton::Error& e) {
    std::cerr << e.what() << std::endl;
    return 2;
  }
  return 0;
}
