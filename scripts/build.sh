#!/usr/bin/env bash
# Configures and builds baton into build/ (the CLI lands at build/baton).
# BATON_JOBS overrides the parallel job count (default: cores, at most 2 for
# the torch translation units, which need about 2 GiB each).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${BATON_JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${BATON_CMAKE_ARGS:-} >/dev/null
ninja -C build -j "$jobs"
