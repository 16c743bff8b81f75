#!/usr/bin/env bash
# --device: cpu or cuda. An unknown name, and cuda where no GPU is visible,
# are refused before any rank starts.
source "$(dirname "$0")/lib/common.sh"
expect_bad_input 'unknown device "tpu" (expected cpu or cuda)' "${T[@]}" --device tpu
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  expect_bad_input "device cuda: this process sees no CUDA device" "${T[@]}" --device cuda
fi
"$baton" train "${T[@]}" --device cpu >/dev/null 2>&1 || fail "--device cpu failed"
echo "1 passed, 0 failed"
