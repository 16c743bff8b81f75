#!/usr/bin/env bash
# The build's layering check (cmake/check_layering.cmake, run before
# any module's library compiles) passes on this tree and fails, naming the file, on a
# copy where a lower module includes an upper one, or a torch-free module
# includes LibTorch, or a unit the fuzzers build without LibTorch reaches it
# through a header.
source "$(dirname "$0")/lib/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
check() { cmake -DROOT="$1" -P "$root/cmake/check_layering.cmake" 2>&1; }
check "$root" > "$tmp/clean.out" || fail "the tree itself breaks the layering: $(cat "$tmp/clean.out")"
mkdir "$tmp/upward"; cp -r "$root/baton" "$tmp/upward/"
echo '#include "baton/runtime/executor.h"' >> "$tmp/upward/baton/schedule/action.h"
out=$(check "$tmp/upward") && fail "schedule including runtime passed the check"
printf '%s' "$out" | grep -qF 'baton/schedule/action.h: #include "baton/runtime/executor.h" (module schedule may not include runtime)' \
  || fail "the check did not name the wrong-way include: $out"
mkdir "$tmp/torch"; cp -r "$root/baton" "$tmp/torch/"
echo '#include <torch/types.h>' >> "$tmp/torch/baton/sim/simulator.cpp"
out=$(check "$tmp/torch") && fail "a torch include in sim passed the check"
printf '%s' "$out" | grep -qF "module sim is above the torch line" || fail "torch include not named: $out"
mkdir "$tmp/unit"; cp -r "$root/baton" "$tmp/unit/"
echo '#include "baton/nn/layer_call.h"' >> "$tmp/unit/baton/train/config.h"
out=$(check "$tmp/unit") && fail "config.cpp reaching LibTorch through a header passed the check"
printf '%s' "$out" | grep -qF "baton/nn/layer_call.h: #include <torch/types.h> (reached from baton/train/config.cpp, which builds without LibTorch)" \
  || fail "the torch include reached from config.cpp was not named: $out"
echo "ok"
