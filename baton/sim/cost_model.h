// What the simulator charges for each action: per-stage compute times,
// activation and parameter bytes, and the link between ranks.
#pragma once

#include <vector>

#include "baton/schedule/schedule.h"

namespace baton::sim {

struct StageCost {
  double forward = 1;          // F time for one micro-batch
  double input_backward = 1;   // I time; a full B costs input_backward + weight_backward
  double weight_backward = 1;  // W time
  double activation_bytes = 1;    // held from F until its B or I
  double weight_stash_bytes = 0;  // of those, held on from I until W (inputs W needs)
  double boundary_bytes = 0;      // output activation sent to the next stage (and its gradient back)
  double parameter_bytes = 0;
};

struct CostModel {
  std::vector<StageCost> stages;  // one per stage of the schedule
  double comm_latency = 0;        // time from a producing action's end to its output's arrival
  double comm_bytes_per_time = 0; // link bandwidth; 0 means infinite

  // Time to move the boundary between stage `stage` and `stage + 1`.
  double comm_time(int stage) const;
  double backward(int stage) const {
    return stages[stage].input_backward + stages[stage].weight_backward;
  }
};

// Costs per rank, as the CLI takes them: tf, tb (full backward) and tw (its
// weight part) are the work of a rank's whole share of the model for one
// micro-batch; a rank holding v chunks pays 1/v of it per chunk action. So
// I = (tb - tw) / v, W = tw / v. `comm` is the latency between ranks.
// REQUIRES: finite costs with 0 <= tw <= tb, tf >= 0, comm >= 0 (throws
// otherwise).
CostModel uniform_cost_model(const schedule::Schedule& schedule, double tf, double tb, double tw,
                             double comm = 0);

}  // namespace baton::sim
