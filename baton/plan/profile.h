// A measured profile (`baton train --profile-out`) in place of the
// Transformer formulas: per-layer times and bytes of one micro-batch on one
// device, read from JSON, and the per-stage sim::CostModel they give a
// configuration. Torch-free.
//
// The file (version 2, kProfileVersion):
//   {"baton_profile": 2, "model": {"model": "mlp", "layers": 8, ...},
//    "microbatch": 32, "backward_split": "halved", ...,
//    "optimizer_s_per_parameter_byte": ..,               (optional, default 0)
//    "action_overhead_s": .., "step_overhead_s": ..,     (optional, default 0)
//    "layers": [{"forward_s": .., "input_backward_s": .., "weight_backward_s": ..,
//                "forward_fixed_s": .., "backward_fixed_s": .., (optional, default 0)
//                "larger": [{"microbatch": .., "forward_s": .., "backward_s": ..}], (optional)
//                "activation_bytes": .., "parameter_bytes": .., "output_bytes": ..}, ...],
//    "memory": {...}}                                     (optional; profile_memory.h)
//
// Times scale with the micro-batch b affinely: a layer's forward at b takes
// forward_fixed_s + (forward_s - forward_fixed_s) * b / microbatch (the fixed
// part: dispatch, kernel launches, small per-call work that does not shrink
// with b), and likewise each half of the backward with half of
// backward_fixed_s. `baton train --profile-out` fits the fixed part from
// timings at b and b / 2. Above the profiled micro-batch, where a layer has
// timings at larger ones ("larger", ascending; `--profile-out` adds the whole
// mini-batch), its times follow the line through them instead, piecewise,
// the last segment extended: a large micro-batch runs more efficiently than
// the line from b / 2 and b says. The optimizer's step costs
// optimizer_s_per_parameter_byte per fp32 parameter byte a rank holds.
//
// What a step costs beyond its layers and the optimizer: each F and each B
// of a stage action_overhead_s more (the loss, the micro-batch split, the
// executor's bookkeeping, the autograd graph of a whole stage), and each step
// step_overhead_s more (zeroing the gradients, the loss's reduction).
// `baton train --profile-out` fits both from whole steps on one process at m
// and m / 2 micro-batches, minus what the layers and the optimizer explain.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "baton/plan/costs.h"
#include "baton/plan/profile_memory.h"

namespace baton::plan {

// A layer's forward and whole backward timed at another micro-batch.
struct ProfiledPoint {
  double microbatch = 1;
  double forward_s = 0;
  double backward_s = 0;
};

struct ProfiledLayer {
  double forward_s = 0;
  double input_backward_s = 0;
  double weight_backward_s = 0;
  double activation_bytes = 0;             // kept from F until B, per micro-batch
  double parameter_bytes = 0;              // fp32 weights
  double output_bytes = 0;                 // the boundary sent when the layer ends a stage
  double forward_fixed_s = 0;              // the part of forward_s that does not scale with b
  double backward_fixed_s = 0;             // the part of the whole backward that does not
  std::vector<ProfiledPoint> larger = {};  // above the profiled micro-batch, ascending
};

struct Profile {
  nlohmann::json model;  // the flags of the model profiled: {"model": "mlp", "layers": 8, ...}
  int microbatch = 1;    // sequences (samples) per micro-batch profiled
  double optimizer_s_per_parameter_byte = 0;
  double action_overhead_s = 0;  // each F and each B of a stage, beyond its layers
  double step_overhead_s = 0;    // each step of a rank, beyond the optimizer
  std::vector<ProfiledLayer> layers;
  // The compute precision the layers were timed in ("fp32", "bf16", "fp16");
  // a profile that records none was timed in fp32.
  std::string precision = "fp32";
  // The layers' measured memory (profile_memory.h); empty in a profile
  // written before `--profile-out` recorded it.
  std::optional<ProfiledMemory> memory;
};

// Parses a profile; throws baton::Error naming `path` and the first problem
// (not JSON, a missing or non-numeric field, a negative or non-finite value,
// no layers).
Profile parse_profile(const std::string& text, const std::string& path);

// The file format's version: 2 since activation_bytes are what a layer
// keeps from F to B (the counting allocator's); a version 1 file is refused.
inline constexpr int kProfileVersion = 2;

// A profile holds a few numbers per layer; anything larger is not one.
inline constexpr uint64_t kMaxProfileBytes = uint64_t{64} << 20;

// Reads and parses the file; throws baton::Error naming it when it does not
// exist, is a folder or another file that is not regular (/dev/zero), holds
// more than kMaxProfileBytes, or cannot be read.
Profile read_profile(const std::string& path);

// Bytes of model state per parameter byte with Adam at a rank's peak, as
// baton's runtime holds them (weights, gradients and two moments, all in the
// weights' dtype; bf16 autocasts over fp32 weights): 1 + 1 + 2 at ZeRO-0 or
// d = 1. ZeRO-1 and 2 divide the moments over the d replicas (a stage's
// gradients are whole until its reduction, the shards' gradients cut at the
// step's end): 2 + 2 / d. ZeRO-3 also holds the weights' shard beside the
// whole weights gathered from UNSHARD to RESHARD: 2 + 3 / d (runtime/zero.h;
// the counting allocator's savings, bench/zero_memory.py).
double profiled_state_per_parameter_byte(int data_parallel, int zero);

// Per-stage costs of configuration `config` (t = 1) from the profile: p v
// stages cut as `baton train --balance uniform` cuts them
// (partition::uniform), each stage the sum of its layers; times and
// activation and boundary bytes scaled by b / profile.microbatch; parameter
// bytes times profiled_state_per_parameter_byte; each stage's F and I
// action_overhead_s more; the pipeline link from `cluster`.
// REQUIRES: config.t == 1, 1 <= p v <= layers.
sim::CostModel profiled_stage_costs(const Profile& profile, const Cluster& cluster,
                                    const Config& config);

// fp32 gradient bytes that rank 0 all-reduces over the data-parallel group.
double profiled_gradient_bytes(const Profile& profile, const Config& config);

// The longest optimizer step of a rank (its stages' parameter bytes times
// optimizer_s_per_parameter_byte, divided by d with ZeRO-1): what it adds to
// the step time.
double profiled_optimizer_seconds(const Profile& profile, const Config& config);

}  // namespace baton::plan
