// One-way point-to-point latency and bandwidth between two local ranks (two
// processes), 64 B to 64 MiB: baton's Communicator over shared memory and
// over Gloo, against raw c10d Gloo send/recv of the same tensors (the
// receiver told the size in advance), and against one memcpy of the same
// bytes into a reused buffer in one process (the limit of any copy), all
// in one run.
//
//   ./build/bench/p2p_latency_bench [max_bytes]
//
// One-way time = median round trip of a ping-pong / 2. It starts its two
// ranks itself (as `baton train --nproc 2` does); each rank runs 1 thread.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "baton/comm/comm_state.h"
#include "baton/comm/communicator.h"
#include "baton/comm/launcher.h"
#include "baton/comm/rank_env.h"

namespace {

using namespace baton::comm;
using Clock = std::chrono::steady_clock;

int iterations_for(int64_t bytes) {
  return static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / bytes, 5, 2000));
}

double median_us(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Median one-way microseconds of a ping-pong of `tensor` through `comm`.
double baton_one_way_us(Communicator& comm, const at::Tensor& tensor) {
  const int peer = 1 - comm.rank();
  const Tag ping{0, 0, Direction::kForward}, pong{1, 0, Direction::kBackward};
  std::vector<double> rtt;
  const int n = iterations_for(tensor.nbytes());
  for (int i = 0; i < n + 3; ++i) {  // the first rounds teach each tag its size
    const auto start = Clock::now();
    if (comm.rank() == 0) {
      comm.isend(tensor, peer, ping).wait("ping");
      comm.irecv(peer, pong).wait("pong");
    } else {
      at::Tensor got = comm.irecv(peer, ping).wait("ping");
      comm.isend(got, peer, pong).wait("pong");
    }
    if (i >= 3)
      rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  return median_us(rtt) / 2;
}

double raw_gloo_one_way_us(Communicator& comm, const at::Tensor& tensor) {
  auto& backend = *comm.state()->backend;
  const int peer = 1 - comm.rank();
  at::Tensor buffer = at::empty_like(tensor);
  std::vector<at::Tensor> out{tensor}, in{buffer};
  std::vector<double> rtt;
  const int n = iterations_for(tensor.nbytes());
  for (int i = 0; i < n + 3; ++i) {
    const auto start = Clock::now();
    if (comm.rank() == 0) {
      backend.send(out, peer, 11)->wait();
      backend.recv(in, peer, 12)->wait();
    } else {
      backend.recv(in, peer, 11)->wait();
      backend.send(in, peer, 12)->wait();
    }
    if (i >= 3)
      rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  return median_us(rtt) / 2;
}

// Median microseconds of one copy of `tensor` into a reused buffer, 1 thread.
double memcpy_us(const at::Tensor& tensor) {
  at::Tensor buffer = at::empty_like(tensor);
  std::vector<double> times;
  const int n = iterations_for(tensor.nbytes());
  for (int i = 0; i < n + 3; ++i) {
    const auto start = Clock::now();
    std::memcpy(buffer.data_ptr(), tensor.data_ptr(), tensor.nbytes());
    if (i >= 3)
      times.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  }
  return median_us(times);
}

int run_rank(const RankEnv& env, int64_t max_bytes) {
  at::set_num_threads(1);
  auto connect_with = [&](TransportKind kind, int port_offset) {
    return connect(ConnectOptions()
                       .set_rank(env.rank)
                       .set_world_size(2)
                       .set_master_addr(env.master_addr)
                       .set_master_port(env.master_port + port_offset)
                       .set_transport(kind));
  };
  Communicator shm = connect_with(TransportKind::kShm, 0);
  Communicator gloo = connect_with(TransportKind::kGloo, 1);
  if (env.rank == 0) {
    std::printf("%10s %12s %12s %12s %12s %10s %10s %12s %12s %12s\n", "bytes", "shm us", "gloo us",
                "raw gloo us", "memcpy us", "shm/raw", "gloo/raw", "shm/memcpy", "shm GB/s",
                "raw GB/s");
  }
  for (int64_t bytes = 64; bytes <= max_bytes; bytes *= 4) {
    const at::Tensor tensor = torch::rand({bytes / 4}, torch::kFloat32);
    const double s = baton_one_way_us(shm, tensor);
    const double g = baton_one_way_us(gloo, tensor);
    const double r = raw_gloo_one_way_us(gloo, tensor);
    if (env.rank == 0) {
      const double c = memcpy_us(tensor);
      std::printf("%10lld %12.2f %12.2f %12.2f %12.2f %9.2fx %9.2fx %11.2fx %12.3f %12.3f\n",
                  static_cast<long long>(bytes), s, g, r, c, r / s, r / g, c / s, bytes / s / 1e3,
                  bytes / r / 1e3);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t max_bytes = argc > 1 ? std::stoll(argv[1]) : (int64_t{64} << 20);
  if (auto env = rank_env_from_environment()) return run_rank(*env, max_bytes);
  // Two ports: one group per transport. The launcher picks the first.
  const int port = find_free_port();
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  std::vector<std::string> command{"/proc/self/exe"};
  if (argc > 1) command.emplace_back(argv[1]);
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  command[0] = std::string(self, static_cast<size_t>(std::max<ssize_t>(n, 0)));
  return launch_local(2, command, LaunchOptions().set_master_port(port));
}
