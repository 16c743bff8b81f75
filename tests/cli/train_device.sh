#!/usr/bin/env bash
# --device: cpu, cuda or cuda:N. An unknown name, a malformed index, and cuda
# where no GPU is visible, are refused before any rank starts.
source "$(dirname "$0")/lib/common.sh"
expect_bad_input 'unknown device "tpu" (expected cpu, cuda, or cuda:N for GPU N)' "${T[@]}" --device tpu
expect_bad_input 'unknown device "cuda:x" (expected cpu, cuda, or cuda:N for GPU N)' "${T[@]}" --device cuda:x
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  expect_bad_input "device cuda: this process sees no CUDA device" "${T[@]}" --device cuda
  expect_bad_input "device cuda: this process sees no CUDA device" "${T[@]}" --device cuda:0
fi
"$baton" train "${T[@]}" --device cpu >/dev/null 2>&1 || fail "--device cpu failed"
echo "1 passed, 0 failed"
