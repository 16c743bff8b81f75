#!/usr/bin/env bash
# Issue 7.1: --threads 100000 started 100000 intra-op threads per rank. More
# threads than the cores this process may run on is rejected up front.
source "$(dirname "$0")/lib/common.sh"
cores=$(nproc)
expect_bad_input "threads must be at most the $cores core(s) this process may run on, got 100000" \
  "${T[@]}" --threads 100000
expect_bad_input "got $((cores + 1))" "${T[@]}" --threads $((cores + 1))
# Bounded by the affinity mask, not the machine: one core allowed, 2 refused.
if command -v taskset >/dev/null; then
  err=$(taskset -c 0 "$baton" train "${T[@]}" --threads 2 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "--threads 2 on one core: exit $rc: $err"
  printf '%s' "$err" | grep -qF "at most the 1 core(s)" || fail "one core: $err"
fi
"$baton" train "${T[@]}" --threads "$cores" >/dev/null 2>&1 || fail "--threads $cores (all cores) failed"
echo "1 passed, 0 failed"
