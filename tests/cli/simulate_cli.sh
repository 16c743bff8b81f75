#!/usr/bin/env bash
# End-to-end checks of `baton simulate`: outputs, files, exit codes, errors.
set -u
baton=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# GPipe bubble (p-1)/(m+p-1) = 3/11 for p=4, m=8 in the JSON.
out=$("$baton" simulate --schedule gpipe --pp 4 --microbatches 8 --json) || fail "gpipe json exit $?"
echo "$out" | grep -q '"bubble_fraction":0.2727272727' || fail "gpipe bubble: $out"
echo "$out" | grep -q '"peak_inflight":\[8,8,8,8\]' || fail "gpipe inflight: $out"
echo "$out" | grep -q '"makespan":33' || fail "gpipe makespan: $out"

# Every schedule prints, draws and traces.
for s in naive gpipe 1f1b interleaved looped-bfs zb-h1 zb-h2 zb-v interleaved-zb chimera dualpipev v-half v-min; do
  "$baton" simulate --schedule "$s" --pp 4 --microbatches 8 --grid \
    --svg "$tmp/$s.svg" --trace "$tmp/$s.json" > "$tmp/$s.txt" || fail "$s exit $?"
  grep -q "makespan" "$tmp/$s.txt" || fail "$s printed no makespan"
  grep -q "<svg" "$tmp/$s.svg" || fail "$s wrote no svg"
  grep -q "traceEvents" "$tmp/$s.json" || fail "$s wrote no chrome trace"
done

# A hand-written compute-only file is lowered, validated and simulated.
printf '0F0 0F1 0B0 0B1\n1F0 1B0 1F1 1B1\n' > "$tmp/hand.txt"
"$baton" simulate --schedule-file "$tmp/hand.txt" --json | grep -q '"pp":2' || fail "schedule file"

# An invalid file: exit 2, the rule on the first line, the grid after it.
printf '0F0 0B0 0F1 0B1\n1B0 1F0 1F1 1B1\n' > "$tmp/bad.txt"
err=$("$baton" simulate --schedule-file "$tmp/bad.txt" 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "invalid schedule exit $rc"
echo "$err" | head -1 | grep -q "runs B before F" || fail "invalid schedule message: $err"
echo "$err" | grep -q ">1B0<" || fail "grid mark missing: $err"

# Bad flags and values: one line, exit 2.
for args in "--bogus" "--pp 0" "--schedule nope" "--microbatches x" "--schedule gpipe --virtual 3" \
            "--tb 1 --tw 2"; do
  err=$("$baton" simulate $args 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "'$args' exit $rc"
  [ "$(echo "$err" | wc -l)" -eq 1 ] || fail "'$args' printed more than one line: $err"
done
# Issue 10.3: steady_step, steps back to back without a barrier: zb-v's ranks
# are each busy 48 of a 51 makespan, and that is the time per step (see
# tests/sim/steady_step_test.cpp for the hand computation).
out=$("$baton" simulate --schedule zb-v --pp 4 --microbatches 8 --tf 2 --tb 4 --tw 2 --json)
echo "$out" | grep -q '"makespan":51.0,' || fail "zb-v makespan: $out"
echo "$out" | grep -q '"steady_step":48.0,' || fail "zb-v steady_step: $out"
"$baton" simulate --schedule zb-v --pp 4 --microbatches 8 --tf 2 --tb 4 --tw 2 \
  | grep -q "^makespan 51  steady step 48  bubble" || fail "zb-v steady step in the text output"
echo "1 passed, 0 failed"
