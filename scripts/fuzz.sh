#!/usr/bin/env bash
# Fuzzes the schedule text format (parse, validate, lower, simulate; torch-free)
# with libFuzzer under AddressSanitizer and UBSan for FUZZ_SECONDS seconds
# (default 60). Fails on any crash, sanitizer report, leak or timeout; the
# input that caused it is left in build-fuzz/ as crash-*, leak-* or timeout-*.
#
#   FUZZ_SECONDS=300 bash scripts/fuzz.sh
#   FUZZ_TARGET=schedule_csv bash scripts/fuzz.sh   # PyTorch's schedule CSV instead
#   FUZZ_TARGET=config_toml bash scripts/fuzz.sh    # the training config's TOML
#   FUZZ_TARGET=idx bash scripts/fuzz.sh            # Fashion-MNIST's IDX data files
#   FUZZ_TARGET=checkpoint_manifest bash scripts/fuzz.sh  # a checkpoint's manifest.json
#   FUZZ_TARGET=indexed_dataset bash scripts/fuzz.sh      # Megatron's .idx and .bin
#
# Needs clang and libFuzzer (Debian: apt-get install clang libclang-rt-14-dev).
# Builds in build-fuzz (FUZZ_BUILD_DIR), separate from the normal build, with
# FUZZ_BUILD_JOBS jobs (default: cores); ccache is keyed as in build.sh, so a
# fresh clone elsewhere reuses an earlier build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${FUZZ_SECONDS:-60}
jobs=${FUZZ_BUILD_JOBS:-$(nproc)}
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
export CCACHE_SLOPPINESS="pch_defines,time_macros,include_file_mtime,include_file_ctime"
target=${FUZZ_TARGET:-schedule_text}

if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ not found; install clang and libclang-rt-14-dev" >&2
  exit 2
fi
mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DBATON_FUZZ=ON -DBATON_WITH_TORCH=OFF \
  -DBATON_BUILD_TESTS=OFF -DBATON_BUILD_BENCH=OFF > "$build/configure.log" 2>&1 \
  || { cat "$build/configure.log" >&2; exit 2; }
ninja -C "$build" -j"$jobs" "${target}_fuzz"

# New inputs go to a corpus in the build folder; the seeds stay as they are.
corpus=$build/corpus/$target
mkdir -p "$corpus"
cd "$build"
"./fuzz/${target}_fuzz" -max_total_time="$seconds" -max_len=8192 -timeout=20 \
  -rss_limit_mb=4096 -print_final_stats=1 -dict="$root/fuzz/$target.dict" \
  "$corpus" "$root/fuzz/corpus/$target"
