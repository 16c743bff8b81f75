#!/usr/bin/env bash
# --max-restarts: a 60-step two-rank run saving every 5 steps, with a rank
# SIGKILLed three times, exits 0; the launcher prints one line per restart,
# naming the dead rank and the step resumed; every step's loss equals the
# undisturbed run's bitwise, and --metrics holds every step once, in order, as
# the undisturbed run's does (a restart drops the lines its checkpoint does
# not hold). --resume auto, and the bad inputs, refused with one line and exit 2.
source "$(dirname "$0")/lib/common.sh"

A=(--model mlp --layers 8 --hidden 512 --in-features 512 --pp 2 --nproc 2 --microbatches 4
   --batch 64 --steps 60 --threads 1 --log-every 1000)
ref_start=$(date +%s%N)
timeout 300 "$baton" train "${A[@]}" --metrics "$tmp/ref.jsonl" > "$tmp/ref.out" 2>&1 \
  || fail "undisturbed run: $(tail -3 "$tmp/ref.out")"
ref_ms=$(( ($(date +%s%N) - ref_start) / 1000000 ))

# last_step <file>: the step of the file's last metrics line (0 when none).
last_step() {
  tail -n 1 "$1" 2>/dev/null | sed -n 's/.*"step":\([0-9]*\).*/\1/p' | grep . || echo 0
}
killed=()
fresh "$tmp/m.jsonl" "$tmp/out" "$tmp/err"
start=$(date +%s%N)
"$baton" train "${A[@]}" --metrics "$tmp/m.jsonl" --save "$tmp/ck" --save-every 5 --max-restarts 3 \
  > "$tmp/out" 2> "$tmp/err" &
launcher=$!
pids+=($launcher)
for target in 12 27 42; do
  for _ in $(seq 1 12000); do
    [ "$(last_step "$tmp/m.jsonl")" -ge $target ] && break
    kill -0 $launcher 2>/dev/null || fail "the run ended before step $target: $(cat "$tmp/err")"
    sleep 0.01
  done
  victim=$(pgrep -P $launcher | sort -n | tail -1)
  [ -n "$victim" ] || fail "no rank to kill at step $target"
  kill -9 "$victim"
  # Wait for the restart line before the next kill.
  for _ in $(seq 1 12000); do
    [ "$(grep -c '^\[launch\] .*: restart' "$tmp/err")" -ge $(( ${#killed[@]} + 1 )) ] && break
    sleep 0.01
  done
  killed+=($target)
done
wait $launcher; rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ $rc -eq 0 ] || fail "exit $rc after three restarts: $(grep -v '^\[rank' "$tmp/err")"
[ "$(grep -c '^\[launch\] rank [01] was killed by signal 9 (Killed): restart [123] of 3, every rank resumes from step [0-9]* of ' "$tmp/err")" -eq 3 ] \
  || fail "not one line per restart naming the rank and step: $(grep '^\[launch\]' "$tmp/err")"
python3 - "$tmp" <<'PY' || fail "the restarted run is not the undisturbed one"
import json, sys
tmp = sys.argv[1]
def steps(name):
    return [json.loads(l) for l in open(f"{tmp}/{name}.jsonl") if '"step"' in l and '"final"' not in l]
ref = {r["step"]: r["loss"] for r in steps("ref")}
got = steps("m")
assert [r["step"] for r in got] == list(range(1, 61)), [r["step"] for r in got]
for r in got:
    assert r["loss"] == ref[r["step"]], (r["step"], r["loss"], ref[r["step"]])
print(f"{len(got)} metrics lines for 60 steps, every loss bitwise the undisturbed run's")
PY
echo "undisturbed run ${ref_ms} ms, with 3 restarts ${elapsed_ms} ms (load $(cut -d" " -f1 /proc/loadavg))"

# Bad input: one line, exit 2.
expect_bad_input "--max-restarts: must be an integer in [0, 2147483647], got -1" "${T[@]}" --max-restarts -1
expect_bad_input "--max-restarts: must be a whole number of at least 0, got \"two\"" "${T[@]}" --max-restarts two
expect_bad_input "--max-restarts 2 needs --save DIR" "${T[@]}" --max-restarts 2
expect_bad_input "--resume auto resumes from the newest checkpoint in --save" "${T[@]}" --resume auto
expect_bad_input "--max-restarts restarts the ranks that --nproc starts" \
  --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --pp 1 --steps 2 --max-restarts 1 --save "$tmp/one"

# --resume auto with nothing saved yet starts afresh; with a checkpoint it resumes.
timeout 300 "$baton" train "${T[@]}" --threads 1 --save "$tmp/auto" --resume auto > "$tmp/auto1.out" 2>&1 \
  || fail "auto without a checkpoint: $(tail -3 "$tmp/auto1.out")"
grep -q "resumed from" "$tmp/auto1.out" && fail "resumed from nothing: $(cat "$tmp/auto1.out")"
timeout 300 "$baton" train "${J[@]}" --hidden 16 --steps 4 --threads 1 --save "$tmp/auto" --resume auto \
  > "$tmp/auto2.out" 2>&1 || fail "auto with a checkpoint: $(tail -3 "$tmp/auto2.out")"
grep -q "resumed from $tmp/auto at step 2" "$tmp/auto2.out" || fail "did not resume: $(cat "$tmp/auto2.out")"
echo "1 passed, 0 failed"
