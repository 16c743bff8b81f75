// --compare-sim: the simulator fed with the costs just measured, against the
// measured timeline of the last step.
#pragma once

#include <map>
#include <vector>

#include "baton/comm/p2p_probe.h"
#include "baton/schedule/schedule.h"
#include "baton/trace/timeline.h"

namespace baton::train {

// Simulates `schedule` with the per-stage mean F, B, I, W times of
// `measured`, the activation and boundary bytes per stage and the probed
// link, and prints measured against simulated: step time, bubble, the
// largest start-time deviation of any action, and `peak.rank`'s peak
// activation bytes. With `earlier` (the world timelines of the steps before
// the last, each started after a barrier as the last is), one more line
// gives the median efficiency and bubbles over all of them, each step
// simulated with its own measured costs.
// With `dp` (data parallelism), the simulation also charges each REDUCE_GRAD
// its bucket's ring all-reduce over the probed dp link, and prints per world
// rank the all-reduce time, exposed and hidden, measured against simulated.
struct DataParallelCosts {
  int dp = 1;
  int world_per_pipeline_rank = 1;  // dp x tp: world rank r is pipeline rank r / this
  comm::AllReduceCost link;
  std::vector<std::vector<double>> bucket_bytes;  // per stage, in reduction order
};

// A rank's measured peak activations: the counting allocator's activations
// at the rank's peak (`allocator`; `stage_bytes` then holds each stage's
// measured kept bytes per micro-batch), or the executor's count of the
// stages' inputs.
struct PeakActivations {
  double measured_bytes = 0;
  int rank = 0;
  bool allocator = false;
};

void compare_with_simulation(const schedule::Schedule& schedule, const trace::Timeline& measured,
                             const std::map<int, double>& stage_bytes,
                             const std::map<int, double>& boundary_bytes, const comm::P2pCost& link,
                             const PeakActivations& peak, const DataParallelCosts* dp = nullptr,
                             const std::map<int, double>& skip_bytes = {},
                             const std::vector<trace::Timeline>& earlier = {});

}  // namespace baton::train
