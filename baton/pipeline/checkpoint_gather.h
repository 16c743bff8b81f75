// Collectives a checkpoint needs to hold whole what ranks hold in parts:
// file lists gathered for the manifest, and the ZeRO-1 optimizer state
// brought from each parameter's owner replica to the one that writes it.
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

// held[i] is what this member holds of item i: its tensors where it owns the
// item, nothing elsewhere (e.g. a parameter's optimizer state under ZeRO-1,
// where only the owner's optimizer has any). Returns for every item the
// owner's tensors (names, shapes, dtypes and values; nothing for an item no
// member holds), on every member: a collective over `group`, every member
// passing the same number of items in the same order. Exact (an all-reduce
// in which only the owner's values are not zero). Throws baton::Error when
// two members hold the same item.
std::vector<NamedTensors> gather_from_owners(comm::Communicator& group,
                                             const std::vector<NamedTensors>& held,
                                             const std::string& what);

}  // namespace baton::checkpoint
