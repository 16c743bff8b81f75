// How an error message lists the values it expected: "fp32, bf16 or fp16".
// The choices' parsers (core/choices.h) and the options table
// (train/options.h) both say it this way.
#pragma once

#include <string>
#include <vector>

namespace baton {

// "a", "a or b", "a, b or c".
std::string expected_list(const std::vector<std::string>& names);

}  // namespace baton
