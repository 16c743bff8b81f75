#!/usr/bin/env bash
# Issue 7.6: write errors were ignored: --metrics /dev/full exited 0. A failed
# write stops the run with one line naming the file (exit 1: a runtime fault).
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
echo "1 passed, 0 failed"
