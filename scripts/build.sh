#!/usr/bin/env bash
# Configures and builds baton into build/ (the CLI lands at build/baton).
# BATON_JOBS overrides the parallel job count (default: cores, at most 2 for
# the torch translation units, which need about 2 GiB each); BATON_BUILD_DIR
# the folder; BATON_CMAKE_ARGS adds CMake arguments (e.g. another LibTorch:
# -DCMAKE_PREFIX_PATH=..., see scripts/test_torch2.sh). Arguments name targets.
# ccache is keyed on paths relative to the checkout, and not on the build
# folder's path (debug builds would hash it), so a fresh clone elsewhere
# reuses what an earlier build compiled.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${BATON_JOBS:-$(nproc)}
dir=${BATON_BUILD_DIR:-build}
export CCACHE_BASEDIR="$PWD"
export CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${BATON_CMAKE_ARGS:-} >/dev/null
ninja -C "$dir" -j "$jobs" "$@"  # targets, if given
