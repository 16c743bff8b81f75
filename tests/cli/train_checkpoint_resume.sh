#!/usr/bin/env bash
# Checkpoints end to end (--save, --save-every, --resume): 2 steps + save +
# resume to 4 gives the losses of 4 steps straight, bitwise on CPU; resuming
# under another pp, schedule or balance gives them within 1e-6 relative; a
# save killed mid-way leaves the previous checkpoint loadable; successive
# saves keep the newest --keep-last step folders.
source "$(dirname "$0")/lib/common.sh"

# C: the job without pp, schedule or balance; every run prints its losses to metrics.
C=(--model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --threads 1 --optimizer adam)
run() {  # run <name> args...: baton train, metrics in $tmp/<name>.jsonl
  local name=$1; shift
  timeout 300 "$baton" train "${C[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -3 "$tmp/$name.out")"
}
# losses <name>: "step loss" lines, the loss printed exactly (repr of the double).
losses() {
  python3 -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "step" in d: print(d["step"], repr(d["loss"]))' "$tmp/$1.jsonl"
}

run straight --pp 2 --nproc 2 --steps 4
run first_half --pp 2 --nproc 2 --steps 2 --save "$tmp/ck"
[ -f "$tmp/ck/manifest.json" ] || fail "no manifest after --save"
run resumed --pp 2 --nproc 2 --steps 4 --resume "$tmp/ck"
grep -q "resumed from $tmp/ck at step 2" "$tmp/resumed.out" || fail "no resume line: $(head -3 "$tmp/resumed.out")"
[ "$(losses resumed)" = "$(losses straight | tail -2)" ] \
  || fail "resumed losses differ from the straight run's: $(losses resumed) vs $(losses straight)"

# Another layout continues with the same losses within 1e-6 relative.
close() {  # close <name>: its losses are within 1e-6 of the straight run's steps 3 and 4
  python3 - "$tmp/$1.jsonl" "$tmp/straight.jsonl" <<'PY' || fail "$1: losses differ by more than 1e-6"
import json, sys
load = lambda p: {d["step"]: d["loss"] for d in map(json.loads, open(p)) if "step" in d}
got, want = load(sys.argv[1]), load(sys.argv[2])
assert sorted(got) == [3, 4], got
for s in got:
    assert abs(got[s] - want[s]) <= 1e-6 * abs(want[s]), (s, got[s], want[s])
PY
}
run pp1 --pp 1 --steps 4 --resume "$tmp/ck"
close pp1
run gpipe_balance --pp 2 --nproc 2 --schedule gpipe --balance 1,3 --steps 4 --resume "$tmp/ck"
close gpipe_balance
run interleaved --pp 2 --nproc 2 --schedule interleaved --steps 4 --resume "$tmp/ck"
close interleaved

# A save killed mid-way (rank 1 dies after its first file of the step-4 save)
# leaves the step-2 checkpoint whole; resuming from it gives the straight losses.
BATON_TEST_KILL_IN_SAVE=1:4 timeout 300 "$baton" train "${C[@]}" --pp 2 --nproc 2 --steps 4 \
  --save "$tmp/killed" --save-every 2 > "$tmp/killed.out" 2>&1 && fail "the killed save exited 0"
python3 -c 'import json,sys; m = json.load(open(sys.argv[1])); assert m["step"] == 2, m["step"]' \
  "$tmp/killed/manifest.json" || fail "the manifest is not step 2's after the killed save"
ls "$tmp/killed/step_00000004.partial" | grep -q '\.tmp\.' || fail "the killed save left no half-written file (hook?)"
ls -d "$tmp/killed/step_00000004" 2>/dev/null && fail "the killed save left a step folder that looks whole"
run after_kill --pp 2 --nproc 2 --steps 4 --resume "$tmp/killed" --save "$tmp/killed"
[ "$(losses after_kill)" = "$(losses straight | tail -2)" ] || fail "resuming after the killed save: $(losses after_kill)"
python3 -c 'import json,sys; m = json.load(open(sys.argv[1])); assert m["step"] == 4, m["step"]' \
  "$tmp/killed/manifest.json" || fail "the manifest is not step 4's after the resumed run"
[ "$(ls "$tmp/killed")" = "$(printf 'manifest.json\nstep_00000002\nstep_00000004')" ] || fail "stale folders: $(ls "$tmp/killed")"
find "$tmp/killed" -name '*.tmp.*' | grep -q . && fail "temporary files left: $(find "$tmp/killed" -name '*.tmp.*')"

# Successive saves into one folder keep the newest --keep-last (default 2).
run every --pp 2 --nproc 2 --steps 3 --save "$tmp/every" --save-every 1
[ "$(ls "$tmp/every")" = "$(printf 'manifest.json\nstep_00000002\nstep_00000003')" ] || fail "after 3 saves: $(ls "$tmp/every")"
run every1 --pp 2 --nproc 2 --steps 3 --save "$tmp/every1" --save-every 1 --keep-last 1
[ "$(ls "$tmp/every1")" = "$(printf 'manifest.json\nstep_00000003')" ] || fail "after 3 saves, --keep-last 1: $(ls "$tmp/every1")"
echo "ok"
