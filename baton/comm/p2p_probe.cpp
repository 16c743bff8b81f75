#include "baton/comm/p2p_probe.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace baton::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Median one-way ms of `tensor` between this rank and `peer` (the lower
// rank pings). The first round teaches the tag its size and is not counted.
double one_way_ms(Communicator& comm, int peer, const torch::Tensor& tensor, int rounds) {
  const bool pings = comm.rank() < peer;
  const Tag ping{kMaxStages - 1, kMaxMicrobatches - 2, Direction::kForward};
  const Tag pong{kMaxStages - 1, kMaxMicrobatches - 2, Direction::kBackward};
  const std::string what = "the communication probe with rank " + std::to_string(peer);
  std::vector<double> samples;
  for (int i = 0; i <= rounds; ++i) {
    const auto start = Clock::now();
    if (pings) {
      comm.isend(tensor, peer, ping).wait(what);
      comm.irecv(peer, pong).wait(what);
    } else {
      torch::Tensor got = comm.irecv(peer, ping).wait(what);
      comm.isend(got, peer, pong).wait(what);
    }
    if (i > 0)
      samples.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count() /
                        2);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

P2pCost measure_p2p_cost(Communicator& comm, int rounds) {
  const int n = comm.world_size(), r = comm.rank();
  if (n < 2) return {};
  const torch::Tensor small = torch::zeros({16}, torch::kFloat32);
  const torch::Tensor large = torch::zeros({1 << 18}, torch::kFloat32);  // 1 MiB
  double latency = 0, seconds_per_byte = 0, pairs = 0;
  for (int phase = 0; phase < 2; ++phase) {
    // Phase 0 pairs (0,1), (2,3), ...; phase 1 pairs (1,2), (3,4), ...
    const int peer = (r % 2 == phase) ? r + 1 : r - 1;
    if (peer < 0 || peer >= n) continue;
    const double small_ms = one_way_ms(comm, peer, small, rounds);
    const double large_ms = one_way_ms(comm, peer, large, std::max(3, rounds / 4));
    latency += small_ms;
    seconds_per_byte += std::max(0.0, large_ms - small_ms) / static_cast<double>(large.nbytes());
    pairs += 1;
  }
  std::vector<torch::Tensor> sums{
      torch::tensor({latency, seconds_per_byte, pairs}, torch::kFloat64)};
  comm.all_reduce_sum(sums, "the communication probe's average");
  const auto* v = sums[0].data_ptr<double>();
  P2pCost cost;
  cost.latency_ms = v[0] / std::max(1.0, v[2]);
  const double ms_per_byte = v[1] / std::max(1.0, v[2]);
  cost.bytes_per_ms = ms_per_byte > 0 ? 1.0 / ms_per_byte : 0;
  return cost;
}

AllReduceCost measure_allreduce_cost(Communicator& group, double bytes, int rounds) {
  const int d = group.world_size();
  if (d < 2) return {};
  const auto median_ms = [&](int64_t numel, int count) {
    std::vector<double> samples;
    for (int i = 0; i <= count; ++i) {  // the first round is not counted
      std::vector<torch::Tensor> tensors{torch::zeros({numel}, torch::kFloat32)};
      const auto start = Clock::now();
      group.all_reduce_sum(tensors, "the all-reduce probe");
      if (i > 0)
        samples.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
    return samples[samples.size() / 2];
  };
  const int64_t numel = std::max<int64_t>(16 << 10, static_cast<int64_t>(bytes / 4));
  const double small_ms = median_ms(16, std::max(3, rounds * 2));
  const double large_ms = median_ms(numel, std::max(1, rounds));
  // Every member reports the mean of all members' figures.
  std::vector<torch::Tensor> sums{torch::tensor({small_ms, large_ms}, torch::kFloat64)};
  group.all_reduce_sum(sums, "the all-reduce probe's average");
  const auto* v = sums[0].data_ptr<double>();
  const double steps = 2.0 * (d - 1);
  const double small = v[0] / d, large = v[1] / d;
  AllReduceCost cost;
  cost.step_latency_ms = small / steps;
  const double moving = large - small;
  cost.bytes_per_ms = moving > 0 ? steps / d * static_cast<double>(numel * 4) / moving : 0;
  return cost;
}

}  // namespace baton::comm
