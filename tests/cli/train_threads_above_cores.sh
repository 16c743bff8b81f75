#!/usr/bin/env bash
# Issue 7.1: --threads 100000 started 100000 intra-op threads per rank. More
# threads than the cores this process may run on is rejected up front.
# Issue 20: ranks x threads above the cores makes OpenMP's waits passive.
source "$(dirname "$0")/lib/common.sh"
cores=$(nproc)
unset OMP_WAIT_POLICY
expect_bad_input "threads must be at most the $cores core(s) this process may run on, got 100000" \
  "${T[@]}" --threads 100000
expect_bad_input "got $((cores + 1))" "${T[@]}" --threads $((cores + 1))
# Bounded by the affinity mask, not the machine: one core allowed, 2 refused.
if command -v taskset >/dev/null; then
  err=$(taskset -c 0 "$baton" train "${T[@]}" --threads 2 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "--threads 2 on one core: exit $rc: $err"
  printf '%s' "$err" | grep -qF "at most the 1 core(s)" || fail "one core: $err"
fi
out=$("$baton" train "${T[@]}" --threads "$cores" 2>&1) || fail "--threads $cores (all cores) failed: $out"
# 2 ranks x all cores: the launcher makes LibTorch's OpenMP threads sleep
# between parallel regions instead of spinning on the other rank's cores...
printf '%s' "$out" | grep -qF "$cores thread(s) per rank (OpenMP waits passive)" \
  || fail "2 ranks x $cores threads on $cores cores: OpenMP not made passive: $out"
# ...unless the user chose a policy, and not when the ranks fit the cores.
out=$(OMP_WAIT_POLICY=ACTIVE "$baton" train "${T[@]}" --threads "$cores" 2>&1) || fail "$out"
printf '%s' "$out" | grep -qF "(OpenMP waits passive)" && fail "the user's OMP_WAIT_POLICY overridden: $out"
if [ "$cores" -ge 2 ]; then
  out=$("$baton" train "${T[@]}" --threads 1 2>&1) || fail "$out"
  printf '%s' "$out" | grep -qF "(OpenMP waits passive)" && fail "2 ranks x 1 thread made passive: $out"
fi
echo "1 passed, 0 failed"
