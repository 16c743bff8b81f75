#!/usr/bin/env bash
# Issue 7.9: `simulate --tf 1e308 --tb 1e308` printed "makespan inf bubble
# -nan%" (JSON null) and exited 0. Costs must be finite and add up to at most
# 1e300 over the schedule; otherwise one line and exit code 2. Issue 7.17: the
# `--tf -1` error printed all 309 digits of the largest double.
set -u
baton=$1
fail() { echo "FAIL: $*"; exit 1; }

check() {  # check "<expected text>" args...
  local expected=$1; shift
  local err rc
  err=$(timeout 60 "$baton" simulate "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "'$*' exit $rc (expected 2): $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "'$*' printed more than one line: $err"
  [ ${#err} -lt 200 ] || fail "'$*' printed ${#err} characters: $err"
  printf '%s' "$err" | grep -qF -- "$expected" || fail "'$*' said: $err (expected: $expected)"
}

check 'add up to inf, more than the limit of 1e+300' --tf 1e308 --tb 1e308
check 'add up to inf, more than the limit of 1e+300' --comm 1e308
check 'add up to 6.4e+301, more than the limit of 1e+300' --tf 1e300 --tb 1e300 --json
check '--tf: must be a finite number >= 0, got -1' --tf -1
check '--tb: must be a finite number >= 0, got inf' --tb inf
check '--tw: must be a finite number >= 0, got nan' --tw nan
check '--comm: must be a finite number >= 0, got 1e400' --comm 1e400
check '--tf: must be a finite number >= 0, got 1x' --tf 1x

out=$("$baton" simulate --tf 1e290 --tb 1e290 --tw 0 --json) || fail "large finite costs exit $?"
printf '%s' "$out" | grep -q null && fail "null in the JSON: $out"
printf '%s' "$out" | grep -q '"makespan":2.2' || fail "makespan: $out"
echo "1 passed, 0 failed"
