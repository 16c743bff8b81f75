// Collectives a checkpoint needs to hold whole what ranks hold in parts:
// file lists gathered for the manifest, and the ZeRO optimizer state put
// together from the replicas' shards for the one that writes it.
// (The tensor-parallel slices are put together by nn::gather_slices.)
// All go through comm::Communicator's all-reduce.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "baton/comm/communicator.h"
#include "baton/pipeline/checkpoint_files.h"

namespace baton::checkpoint {

// Every member's `local`, in the group's rank order, on every member (a
// collective over `group`; a group of one: {local}).
std::vector<nlohmann::json> all_gather_json(comm::Communicator& group, const nlohmann::json& local,
                                            const std::string& what);

// How ZeRO cuts a parameter over the dp group (runtime/zero.h): its shape,
// and this member's elements [begin, begin + length) of it flat.
struct ShardSpan {
  std::vector<int64_t> sizes;
  int64_t begin = 0, length = 0;
};

// held[i] is this member's optimizer state of its shard of item i (e.g.
// {"step", "exp_avg", "exp_avg_sq"}, each of spans[i].length elements; a
// 0-dim entry, Adam's step, is the same on every member). Returns every
// item's whole state, shaped as the parameter, on every member: a
// collective over `group` (each member passing the same entries in the same
// order), exact (an all-reduce of each member's span, zeros elsewhere).
std::vector<NamedTensors> gather_shards(comm::Communicator& group,
                                        const std::vector<NamedTensors>& held,
                                        const std::vector<ShardSpan>& spans,
                                        const std::string& what);

}  // namespace baton::checkpoint
