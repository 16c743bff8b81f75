#!/usr/bin/env bash
# Installs build/ into a temporary prefix, builds examples/cpp against it as a
# user's project (find_package(baton)), and runs each example on 2 local
# ranks. Fails on the first error. Run scripts/build.sh first.
# Usage: scripts/examples.sh [BUILD_DIR] (default build/); BATON_JOBS sets the
# examples' parallel jobs (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
# The work folder sits in the build folder, at the same place in every clone,
# so ccache (keyed on paths relative to the checkout, as in build.sh) reuses
# an earlier clone's objects.
work=$build/examples-work
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"

cmake --install "$build" --prefix "$work/prefix" >/dev/null
torch_dir=$(sed -n 's/^Torch_DIR:PATH=//p' "$build/CMakeCache.txt")
[ -n "$torch_dir" ] || { echo "examples: $build was configured without LibTorch" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S examples/cpp -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  -DCMAKE_PREFIX_PATH="$work/prefix;$torch_dir" -DTorch_DIR="$torch_dir" >/dev/null
ninja -C "$work/build" -j "${BATON_JOBS:-1}" > "$work/build.log" || { tail -30 "$work/build.log" >&2; exit 1; }

for example in sequential layer_specs multi_tensor; do
  echo "== $example"
  # The argument reaches both ranks (launch_self forwards it): 25 steps, not 30.
  (cd "$work/build" && timeout 300 "./$example" 25) > "$work/$example.out" 2>&1 \
    || { cat "$work/$example.out" >&2; echo "examples: $example failed" >&2; exit 1; }
  cat "$work/$example.out"
  grep -q "\[rank 0\] .*25 steps: loss" "$work/$example.out" \
    || { echo "examples: $example did not get its argument" >&2; exit 1; }
done
# A baton::Error on every rank (0 micro-batches): each prints its one line
# and exits 1, and nothing aborts. Whichever rank fails first makes the
# launcher stop the other, so the line of either rank counts.
if (cd "$work/build" && timeout 300 ./sequential 5 0) > "$work/error.out" 2>&1; then
  echo "examples: 0 micro-batches were accepted" >&2; exit 1
fi
grep -q "^\[rank [01]\] sequential: \[pipeline\] microbatches must be at least 1, got 0$" "$work/error.out" \
  && ! grep -q "terminate called" "$work/error.out" \
  || { cat "$work/error.out" >&2; echo "examples: the error was not caught as one line" >&2; exit 1; }
echo "examples: all passed"
