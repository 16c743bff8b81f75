#!/usr/bin/env bash
# scripts/gpu_check.sh's memory stage, its CPU half (issue 32: "without a
# device, write the script and test its CPU half"): the same run and
# comparison as on a GPU, a smaller gpt on the CPU, each rank's prediction
# against the counting allocator within 5%. Bytes are deterministic.
source "$(dirname "$0")/lib/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)

mkdir -p "$tmp/build"
ln -s "$(readlink -f "$baton")" "$tmp/build/baton"
out=$(BATON_GPU_CHECK_DEVICE=cpu BATON_GPU_BUILD_DIR="$tmp/build" bash "$root/scripts/gpu_check.sh" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "gpu_check.sh's memory stage on the CPU exited $rc"
echo "$out" | grep -q "PASS  memory: gpt, 1F1B, p = 4 on cpu: predicted / cpu counter peak: rank 0" ||
  fail "no PASS line for the memory stage"
[ "$(echo "$out" | grep -o 'rank [0-9] [0-9.]* / [0-9.]* MB' | wc -l)" -eq 4 ] ||
  fail "not 4 ranks in the report"

# Only the memory stage runs on the CPU.
err=$(BATON_GPU_CHECK_DEVICE=cpu BATON_GPU_BUILD_DIR="$tmp/build" \
      bash "$root/scripts/gpu_check.sh" train 2>&1); rc=$?
[ $rc -eq 2 ] || fail "the train stage on the CPU exited $rc, not 2"
echo "$err" | grep -q 'runs the memory stage alone, not "train"' || fail "$err"
echo "ok"
