// A plan (baton plan) as a `baton train` config, for --emit-config: the
// model's shape, t, p, d, ZeRO, schedule, v, micro-batches, batch, the stage
// cut as `balance` counts and recomputation. Torch-free.
#pragma once

#include <string>

#include "baton/plan/search.h"
#include "baton/train/config.h"

namespace baton::train {

// The config that runs `plan` for `request` (a gpt model; not a profile's).
// baton train's gpt has the embedding and the LM head as layers of their
// own, so `balance` counts l + 2 layers: the first stage's blocks + 1, the
// last's + 1. The planner's memory is mixed precision with Adam: bf16, adam.
// REQUIRES: !request.profile.
TrainConfig plan_config(const plan::PlanRequest& request, const plan::Plan& plan);

// plan_config's TOML (options.h's writer) with the keys a plan decides;
// `header` becomes comment lines at the top.
std::string plan_config_toml(const plan::PlanRequest& request, const plan::Plan& plan,
                             const std::string& header);

}  // namespace baton::train
