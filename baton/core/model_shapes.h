// Shapes that both the torch-free checks and planner and the torch models
// derive, so that neither has to reach the other's module.
#pragma once

#include <cstdint>

namespace baton {

// Llama's SwiGLU width for `hidden`: 2/3 of 4 hidden, rounded up to a
// multiple of 256 (Llama's multiple_of).
constexpr int64_t llama_ffn_hidden(int64_t hidden) {
  constexpr int64_t kMultipleOf = 256;
  const int64_t ffn = 2 * (4 * hidden) / 3;
  return (ffn + kMultipleOf - 1) / kMultipleOf * kMultipleOf;
}

}  // namespace baton
