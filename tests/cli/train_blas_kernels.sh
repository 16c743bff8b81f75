#!/usr/bin/env bash
# OpenBLAS 0.3.21 (Debian 12's) does not know the newest Xeons and runs its
# generic Prescott kernels there, 3-4x slower (baton/core/blas_kernels.h).
# `baton train` then runs again with OPENBLAS_CORETYPE set to what the CPU
# takes, and its first line names the kernels. OpenBLAS's own report
# (OPENBLAS_VERBOSE=2: "Core: <name>" each time it loads) is the independent
# witness; a user's OPENBLAS_CORETYPE stands.
source "$(dirname "$0")/lib/common.sh"
unset OPENBLAS_CORETYPE
out=$(OPENBLAS_VERBOSE=2 "$baton" train "${T[@]}" 2>"$tmp/err") || fail "train failed: $out $(cat "$tmp/err")"
header=$(printf '%s\n' "$out" | grep -m1 "baton train: model")
if ! printf '%s' "$header" | grep -q "OpenBLAS"; then
  echo "skipped: this build's LibTorch does its products without OpenBLAS ($header)"; exit 77
fi
named=$(printf '%s' "$header" | sed -n 's/.*OpenBLAS \([A-Za-z0-9]*\) kernels.*/\1/p')
first=$(grep -m1 -o "^Core: [A-Za-z0-9]*" "$tmp/err" | cut -d' ' -f2)
[ -n "$first" ] || fail "OpenBLAS printed no core with OPENBLAS_VERBOSE=2: $(head -c 500 "$tmp/err")"
flags=$(grep -m1 "^flags" /proc/cpuinfo)
has() { printf '%s' "$flags" | grep -qw "$1"; }
if [ "$first" = "Prescott" ] && has avx2 && has fma; then
  want=Haswell
  if has avx512f && has avx512bw && has avx512dq && has avx512vl && has avx512cd; then want=SkylakeX; fi
  [ "$named" = "$want" ] || fail "OpenBLAS fell back to Prescott on a CPU with AVX2; expected $want kernels, the header says: $header"
  grep -q "^Core: $want" "$tmp/err" || fail "OpenBLAS never loaded with $want: $(grep '^Core' "$tmp/err")"
  grep -q "warning: OpenBLAS" "$tmp/err" && fail "the re-run still warned: $(cat "$tmp/err")"
else
  # OpenBLAS chose for itself: left alone.
  [ "$named" = "$first" ] || fail "OpenBLAS chose $first itself, but the run used $named: $header"
fi
# The user's choice stands.
out=$(OPENBLAS_CORETYPE=Haswell "$baton" train "${T[@]}" 2>&1) || fail "$out"
printf '%s' "$out" | grep -qF "OpenBLAS Haswell kernels" || fail "OPENBLAS_CORETYPE=Haswell overridden: $out"
echo "1 passed, 0 failed"
