// The planner's picture: predicted throughput (sequences per second) against
// memory per GPU for every candidate (grey: lower bounds, not simulated; blue:
// simulated), the chosen plan marked in red, the memory limit as a dashed
// vertical line. Plain SVG, no script.
#pragma once

#include <string>

#include "baton/plan/search.h"

namespace baton::plan {

std::string plot_svg(const PlanResult& result, double memory_limit_gb, const std::string& title);

}  // namespace baton::plan
