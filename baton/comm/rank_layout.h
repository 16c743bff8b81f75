// Where one rank sits in a dp x pp x tp run, with the communicators it talks
// over. One value, built once (make_rank_layout) and handed down: the
// pipeline, the executor and the tensor-parallel layers read their
// coordinates and groups from it instead of each keeping its own copy.
//
// Every group is a communicator, never null: a group of one rank (dp = 1,
// tp = 1, or a one-process run) is a solo communicator (comm::solo), whose
// collectives return their input and which has no peers.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "baton/comm/communicator.h"
#include "baton/topology/topology.h"

namespace baton::comm {

struct RankLayout {
  topology::Topology grid{1, 1, 1};
  topology::Coords here;  // this rank's dp, pp and tp index
  // This process's index on its machine (its GPU under --device cuda).
  int local_rank = 0;
  std::shared_ptr<Communicator> world;  // every rank of the run
  std::shared_ptr<Communicator> dp;     // the replicas of this rank's stages
  std::shared_ptr<Communicator> tp;     // the tensor-parallel shares of them

  int world_rank() const { return world->rank(); }
  int world_size() const { return world->world_size(); }
  int pipeline_rank() const { return here.pp; }
  // The world rank of pipeline rank `p` of this rank's pipeline (same dp and
  // tp index): where the schedule's rank p runs.
  int world_rank_of(int pipeline_rank) const {
    return grid.rank({here.dp, pipeline_rank, here.tp});
  }
};

// A communicator of one rank: rank 0 of 1, collectives leave their tensors
// as they are, a barrier returns at once, isend and irecv refuse (there is no
// peer), new_group({0}) is another solo communicator.
std::shared_ptr<Communicator> solo(std::chrono::milliseconds timeout = kDefaultTimeout);

// `world` as a shared pointer that does not own it, for a communicator the
// caller keeps alive (tests' run_local_group, PipelineOptions::communicator).
std::shared_ptr<Communicator> borrow(Communicator& world);

// The layout of world->rank() in `grid`. Collective over `world`: the tp
// group, then the dp group, are made with Communicator::new_group where they
// have more than one rank, and are solo otherwise. Throws baton::Error naming
// the grid when it is not the world's size.
RankLayout make_rank_layout(std::shared_ptr<Communicator> world, const topology::Topology& grid,
                            int local_rank = 0);

}  // namespace baton::comm
