// A measured profile (`baton train --profile-out`) in place of the
// Transformer formulas: per-layer times and bytes of one micro-batch on one
// device, read from JSON, and the per-stage sim::CostModel they give a
// configuration. Torch-free.
//
// The file (version 1):
//   {"baton_profile": 1, "model": {"model": "mlp", "layers": 8, ...},
//    "microbatch": 32, "backward_split": "halved", ...,
//    "layers": [{"forward_s": .., "input_backward_s": .., "weight_backward_s": ..,
//                "activation_bytes": .., "parameter_bytes": .., "output_bytes": ..}, ...]}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "baton/plan/costs.h"

namespace baton::plan {

struct ProfiledLayer {
  double forward_s = 0;
  double input_backward_s = 0;
  double weight_backward_s = 0;
  double activation_bytes = 0;  // kept from F until B, per micro-batch
  double parameter_bytes = 0;   // fp32 weights
  double output_bytes = 0;      // the boundary sent when the layer ends a stage
};

struct Profile {
  nlohmann::json model;       // the flags of the model profiled: {"model": "mlp", "layers": 8, ...}
  int microbatch = 1;         // sequences (samples) per micro-batch profiled
  std::vector<ProfiledLayer> layers;
};

// Parses a profile; throws baton::Error naming `path` and the first problem
// (not JSON, a missing or non-numeric field, a negative or non-finite value,
// no layers).
Profile parse_profile(const std::string& text, const std::string& path);
// Reads and parses the file; throws baton::Error naming it when it cannot be read.
Profile read_profile(const std::string& path);

// Bytes of model state per fp32 parameter byte with Adam: weights, gradients
// and two moments, all fp32: 1 + 1 + 2.
inline constexpr double kAdamStatePerParameterByte = 4;

// Per-stage costs of configuration `config` (t = 1) from the profile: p v
// stages cut as `baton train --balance uniform` cuts them
// (partition::uniform), each stage the sum of its layers; times and
// activation and boundary bytes scaled by b / profile.microbatch; parameter
// bytes times kAdamStatePerParameterByte; the pipeline link from `cluster`.
// REQUIRES: config.t == 1, 1 <= p v <= layers.
sim::CostModel profiled_stage_costs(const Profile& profile, const Cluster& cluster,
                                    const Config& config);

// fp32 gradient bytes that rank 0 all-reduces over the data-parallel group.
double profiled_gradient_bytes(const Profile& profile, const Config& config);

}  // namespace baton::plan
