#!/usr/bin/env bash
# Issue 7.4: running out of memory in a rank printed a 50-line C++ stack dump.
# Sizes whose parameters cannot fit in this machine's memory are rejected
# before any rank starts (exit 2); an allocation that fails in a rank is one
# line naming the rank, the layer and the bytes (exit 1).
source "$(dirname "$0")/lib/common.sh"
memory=$(( $(getconf _PHYS_PAGES) * $(getconf PAGE_SIZE) ))
# About 2e18 weights of 4 bytes.
expect_bad_input "model mlp needs 8000000308" "${J[@]}" --steps 2 --hidden 1000000000
expect_bad_input "bytes of parameters, more than the $memory bytes of memory on this machine" \
  "${J[@]}" --steps 2 --hidden 1000000000
# Layer 0 of this MLP is 20000 x 20000 floats (1.6 GB): it fits in memory but
# not under a 1.5 GB data limit (ulimit -d: heap and anonymous maps, not the
# shared libraries, which for a CUDA LibTorch alone exceed 1.5 GB of address
# space), so the rank's allocation fails.
if [ -n "${ASAN_OPTIONS:-}" ]; then
  echo "SKIP: the bad-input half passed; a 1.5 GB data limit leaves no room for AddressSanitizer's shadow memory"
  exit 77
fi
args=(--model mlp --layers 2 --hidden 20000 --in-features 20000 --batch 8 --microbatches 2
      --steps 1 --threads 1)
for n in 1 2; do
  err=$( (ulimit -d 1500000; timeout 120 "$baton" train "${args[@]}" --pp $n --nproc $n) 2>&1 >/dev/null)
  rc=$?
  [ $rc -eq 1 ] || fail "nproc $n: exit $rc (expected 1): $err"
  # One line per rank at most, and the launcher's.
  [ "$(printf '%s\n' "$err" | grep -c .)" -le $((n + 1)) ] || fail "nproc $n: more lines: $err"
  printf '%s' "$err" | grep -qE "baton: error: rank 0: .*layer 0 \(linear0_relu\) cannot allocate 1600000000 bytes for its parameters: out of memory" \
    || fail "nproc $n: no line naming rank, layer and bytes: $err"
  [ $n -eq 1 ] || printf '%s' "$err" | grep -q "\[launch\] rank 0 exited with code 1" \
    || fail "the launcher does not name rank 0: $err"
done
echo "1 passed, 0 failed"
