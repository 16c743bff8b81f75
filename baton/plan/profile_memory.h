// The memory model's measured figures as a profile carries them, and each
// rank's predicted peak from them: what `baton simulate --profile` prints.
// Torch-free.
//
// `baton train --profile-out` measures every layer with the counting
// allocator (runtime/memory_profile.h: what its graph keeps, its forward's
// and backward's temporaries, what a split backward leaves for W) and writes
// them as the profile's "memory" object:
//   "memory": {"layers": [{"graph_bytes": .., "keeps_input": .., ...}, ...],
//              "stage_inputs": [...], "loss": {...},
//              "largest_parameter_bytes": [per layer],
//              "optimizer_state_per_parameter_byte": 2,
//              "gradients_freed": true, "sends_copied_up_to": 262144,
//              "receives_on_arrival_up_to": 65535}
// (receives_on_arrival_up_to may be absent, in profiles written before it:
// 0, every message held all step.)
// A profile written before this object existed has none; the simulator then
// says how to write one again.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "baton/partition/partition.h"
#include "baton/schedule/schedule.h"
#include "baton/sim/memory_model.h"

namespace baton::plan {

struct ProfiledMemory {
  sim::ModelMemory model;                         // one micro-batch of the profiled size
  std::vector<double> parameter_bytes;            // per layer (the profile's)
  std::vector<double> largest_parameter_bytes;    // per layer: its largest parameter tensor
  double optimizer_state_per_parameter_byte = 2;  // Adam's two moments; 0 for SGD
  bool gradients_freed = false;                   // LibTorch 2.x: zero_grad sets them to none
  double sends_copied_up_to = 0;                  // the shared-memory transport's inline messages
  double receives_on_arrival_up_to = 0;           // its messages held from arrival to their B only
};

// `object[key]` of the profile at `path`, a finite number of at least 0;
// throws baton::Error naming the file, `where` (e.g. "layer 3") and the key,
// and saying how to write the profile again. Every number a profile holds is
// read through it.
double profile_number(const nlohmann::json& object, const char* key, const std::string& where,
                      const std::string& path);

// The "memory" object of a profile (the layout above).
nlohmann::json profiled_memory_json(const ProfiledMemory& memory);

// Parses a profile's "memory" object; throws baton::Error naming `path` and
// the first field missing or not a finite number at least 0.
ProfiledMemory parse_profiled_memory(const nlohmann::json& memory, const std::string& path);

// The data-parallel replicas of each pipeline rank, as the runtime shards
// their state (runtime/zero.h): under ZeRO 1-3 with dp > 1 each replica
// steps a 1/dp shard of its stages' parameters (the optimizer's state, and
// the gradient shards cut beside the whole gradients at the step's end);
// under ZeRO-3 its parameters rest as that shard and are gathered whole
// from UNSHARD to RESHARD. Shards are exact up to their padding (at most
// dp - 1 elements a tensor).
struct Replicas {
  int dp = 1;
  int zero = 0;
};

// Each rank's predicted peak by category (sim::predict_rank_memory) for the
// lowered schedule `schedule` at the profiled micro-batch, on one tp rank and
// one replica of `replicas`: its stages cut by `cut` (empty: as `baton train
// --balance uniform` cuts them), and micro-batch mb recomputed where
// `recomputed[mb]` (empty: none). The data batch and the transports'
// buffers (the allocator's "other") are not in a profile and count 0.
// `traces`, when given, receives each rank's walk action by action.
// Throws baton::Error when the schedule has more stages than the profile
// layers, or `cut` is not one of the profile's layers into its stages.
std::vector<sim::MemoryPrediction> profiled_rank_memory(
    const ProfiledMemory& memory, const schedule::Schedule& schedule,
    const std::optional<partition::Partition>& cut = std::nullopt,
    const std::vector<bool>& recomputed = {}, Replicas replicas = {},
    std::vector<sim::MemoryTrace>* traces = nullptr);

}  // namespace baton::plan
