#!/usr/bin/env bash
# Issue 7.6: write errors were ignored: --metrics /dev/full and `> /dev/full`
# exited 0. A failed write stops the run with one line naming the file or
# standard output (exit 1: a runtime fault).
source "$(dirname "$0")/lib/common.sh"
[ -w /dev/full ] || { echo "no writable /dev/full; skipped"; exit 77; }
for n in 1 2; do
  err=$(timeout 120 "$baton" train --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 \
        --steps 2 --pp $n --nproc $n --threads 1 --metrics /dev/full 2>&1 >/dev/null); rc=$?
  [ $rc -eq 1 ] || fail "nproc $n: --metrics /dev/full exit $rc (expected 1): $err"
  printf '%s' "$err" | grep -q 'baton: error: .*cannot write the metrics file "/dev/full": No space left on device' \
    || fail "nproc $n: no clear line: $err"
done
for flag in --svg --trace; do
  err=$(timeout 120 "$baton" train "${T[@]}" --threads 1 $flag /dev/full 2>&1 >/dev/null); rc=$?
  [ $rc -eq 1 ] || fail "$flag /dev/full exit $rc (expected 1): $err"
  printf '%s' "$err" | grep -q 'cannot write .* to "/dev/full"' || fail "$flag: no clear line: $err"
done
# Standard output: `baton T > /dev/full` exited 0, with every progress line
# lost, through the launcher (nproc 2) and on a rank of its own (nproc 1).
for n in 1 2; do
  err=$(timeout 120 "$baton" train --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 \
        --steps 2 --pp $n --nproc $n --threads 1 2>&1 >/dev/full); rc=$?
  [ $rc -eq 1 ] || fail "nproc $n: > /dev/full exit $rc (expected 1): $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "nproc $n: > /dev/full printed more than one line: $err"
  expected="baton: error: rank 0: [train] cannot write to standard output: No space left on device"
  [ $n -eq 1 ] || expected="[launch] cannot write the ranks' output to standard output: No space left on device"
  printf '%s' "$err" | grep -qF -- "$expected" || fail "nproc $n: > /dev/full: no clear line: $err"
done
err=$(timeout 120 "$baton" train "${T[@]}" --threads 1 2>&1 >&-); rc=$?
[ $rc -eq 1 ] || fail "closed stdout exit $rc (expected 1): $err"
printf '%s' "$err" | grep -q 'baton: error: \[train\] standard output is closed' || fail "closed stdout: $err"
echo "1 passed, 0 failed"
