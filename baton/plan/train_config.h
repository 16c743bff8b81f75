// A plan as a `baton train` TOML config (docs/cli.md's keys): the model's
// shape, t, p, d, ZeRO, schedule, v, micro-batches, batch, the stage cut as
// `balance` counts and recomputation. Torch-free: text only.
#pragma once

#include <string>

#include "baton/plan/search.h"

namespace baton::plan {

// The TOML of `plan` for `request` (a gpt model; not a profile's). baton
// train's gpt has the embedding and the LM head as layers of their own, so
// `balance` counts l + 2 layers: the first stage's blocks + 1, the last's + 1.
// `header` becomes comment lines at the top.
// REQUIRES: !request.profile.
std::string train_config_toml(const PlanRequest& request, const Plan& plan,
                              const std::string& header);

}  // namespace baton::plan
