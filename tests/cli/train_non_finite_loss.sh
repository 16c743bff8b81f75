#!/usr/bin/env bash
# Issue 7.8: --lr inf trained to a NaN loss and exited 0. A non-finite --lr is
# rejected (exit 2); a loss that turns non-finite stops every rank with a
# line naming the step (exit 1).
source "$(dirname "$0")/lib/common.sh"
for lr in inf nan -inf 0 -1; do
  expect_bad_input "lr must be a finite positive number, got" "${T[@]}" --lr $lr
done
# SGD at lr 1e30 overflows the weights within a few steps.
args=(--model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --steps 20 --pp 2 --nproc 2
      --threads 1 --optimizer sgd --lr 1e30)
timeout 120 "$baton" train "${args[@]}" > "$tmp/out" 2> "$tmp/err"; rc=$?
[ $rc -eq 1 ] || fail "a diverging run exit $rc (expected 1): $(cat "$tmp/err")"
for r in 0 1; do
  grep -qE "^\[rank $r\] baton: error: \[train\] rank $r: the loss of step [0-9]+ is (nan|inf|-nan); training diverged" "$tmp/err" \
    || fail "rank $r does not name the step: $(cat "$tmp/err")"
done
grep -q "^step 20/" "$tmp/out" && fail "the run went on to the end: $(cat "$tmp/out")"
echo "1 passed, 0 failed"
