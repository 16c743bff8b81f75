// Reducers: what a schedule's reduction actions do on real gradients.
//
// BucketReducer runs REDUCE_GRAD: data parallelism's gradient buckets. Each
// stage's parameters are packed in order into buckets of `bucket_bytes`
// (schedule::gradient_bucket_members, the packing that sized the schedule's
// REDUCE_GRADs), and a REDUCE_GRAD starts the all-reduce of one bucket over
// the dp group without blocking, so the result is the replicas' mean.
//
// TiedReducer runs REDUCE_TIED: the sum of the copies of a parameter held
// more than once in the pipeline (a stage on several ranks, as in Chimera; a
// tied weight, as a GPT's embedding and LM head), so every copy steps
// identically. A tie group's sum runs at a rank's last REDUCE_TIED of the
// group: one message each way per other rank of the group, the parts added in
// rank order so every copy gets the same bits.
#pragma once

#include <torch/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/comm/rank_layout.h"
#include "baton/runtime/stage.h"
#include "baton/schedule/schedule.h"

namespace baton::runtime {

// One copy of a tied weight: its stage and its parameter name as
// Stage::module().named_parameters() gives it (e.g. "0.token.weight").
struct TiedCopy {
  int stage;
  std::string name;
};

class BucketReducer {
 public:
  // `dp_group`: the replicas of this rank's stages; with one replica (a solo
  // communicator) every REDUCE_GRAD is the identity.
  // Throws baton::Error unless the schedule reduces each stage of `rank` in
  // exactly as many REDUCE_GRADs as it has buckets (one when it has none).
  BucketReducer(const schedule::Schedule& schedule, int rank,
                const std::map<int, std::shared_ptr<Stage>>& stages,
                std::shared_ptr<comm::Communicator> dp_group, double bucket_bytes);

  // REDUCE_GRAD of bucket `bucket` of stage `stage`: divides its gradients by
  // the dp size (DDP's order: divide, then sum) and starts their sum. Nothing
  // to wait for with one replica or for a stage without parameters.
  std::optional<comm::ReduceHandle> start(int stage, int bucket) const;
  // The parameters (indices into Stage::parameters()) of that bucket; empty
  // with one replica or for a stage without parameters.
  std::vector<int> members(int stage, int bucket) const;

 private:
  std::map<int, std::shared_ptr<Stage>> stages_;
  std::shared_ptr<comm::Communicator> dp_group_;
  // Per stage: its buckets' parameter indices (into Stage::parameters()), in
  // reduction order.
  std::map<int, std::vector<std::vector<int>>> buckets_;
};

// Waits for the reductions in `pending` and clears it; returns the time it
// waited, ms (0 when none were pending).
double wait_all(std::vector<comm::ReduceHandle>& pending);

class TiedReducer {
 public:
  // `tied`: the copies of each tied weight (every rank is given the same
  // list); a replicated stage's parameters need no entry. The parts travel
  // over `layout`'s world communicator between the ranks of its pipeline;
  // received parts are moved to `device`.
  // Throws baton::Error when a stage of `rank` holds parameters with copies
  // elsewhere but the schedule has no REDUCE_TIED of it on `rank`.
  TiedReducer(const schedule::Schedule& schedule, const schedule::Placement& placement,
              const comm::RankLayout& layout, const std::map<int, std::shared_ptr<Stage>>& stages,
              const std::vector<std::vector<TiedCopy>>& tied, torch::Device device);

  // Whether action `index` of this rank is its last REDUCE_TIED of `group`,
  // where the group's sum runs.
  bool sums_at(int group, size_t index) const;

  // Sums the copies' gradients of tie group `group` over the group's ranks
  // into every copy on this rank. REQUIRES: no all-reduce still writes them.
  void sum(int group);

 private:
  // This rank's copies by slot ("tied/<i>" for tied weight i, else the
  // parameter's name), the slots each other rank of the group shares with
  // this one, and the index of this rank's last REDUCE_TIED of the group.
  struct Group {
    std::map<std::string, std::vector<torch::Tensor>> copies;
    std::map<int, std::vector<std::string>> shared;  // other rank -> slots, sorted
    size_t last = 0;
  };

  int rank_;  // in the pipeline
  comm::RankLayout layout_;
  torch::Device device_;
  std::map<int, Group> groups_;
};

}  // namespace baton::runtime
