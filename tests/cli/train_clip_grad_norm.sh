#!/usr/bin/env bash
# --clip-grad-norm: the global norm each step writes to --metrics is the one
# process's (pp 1) within 1e-5 on a tied gpt over (dp, pp, tp) = (2, 2, 2);
# a binding clip changes the run; bad values, schedules without a flush and a
# resume that changes the clip are refused with one line and exit 2.
source "$(dirname "$0")/lib/common.sh"

G=(--model gpt --layers 2 --hidden 16 --heads 2 --context 8 --tie-embeddings --batch 16
   --microbatches 2 --steps 3 --threads 1 --optimizer sgd --lr 0.05)
run() {  # run <name> args...: trains, metrics in $tmp/<name>.jsonl
  local name=$1; shift
  timeout 300 "$baton" train "${G[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -3 "$tmp/$name.out")"
}
run one --pp 1 --clip-grad-norm 0.1
run grid --dp 2 --pp 2 --tp 2 --nproc 8 --clip-grad-norm 0.1
run unclipped --pp 1
python3 - "$tmp" <<'PY' || fail "the norms or losses do not match"
import json, sys
tmp = sys.argv[1]
def steps(name):
    return [json.loads(l) for l in open(f"{tmp}/{name}.jsonl") if '"step"' in l]
one, grid, unclipped = steps("one"), steps("grid"), steps("unclipped")
assert len(one) == len(grid) == 3, (len(one), len(grid))
for a, b in zip(one, grid):
    assert a["grad_norm"] > 0.2, a          # the clip binds
    assert abs(a["grad_norm"] - b["grad_norm"]) <= 1e-5 * a["grad_norm"], (a, b)
    assert abs(a["loss"] - b["loss"]) <= 1e-5 * abs(a["loss"]), (a, b)
assert "grad_norm" not in unclipped[0], unclipped[0]
assert abs(one[-1]["loss"] - unclipped[-1]["loss"]) > 1e-4 * abs(unclipped[-1]["loss"]), (one[-1], unclipped[-1])
PY

# Regression (issue 30, item 17): the start-up line names the precision and
# the clip; simulate's --clip-grad-norm takes the same value train's does.
grep -qF "precision fp32, clip-grad-norm 0.1," "$tmp/one.out" || fail "no clip in: $(head -1 "$tmp/one.out")"
grep -qF "precision fp32, no clipping," "$tmp/unclipped.out" || fail "$(head -1 "$tmp/unclipped.out")"
S=(--schedule 1f1b --pp 2 --microbatches 4 --dp 2 --param-mb 1)
plain=$("$baton" simulate "${S[@]}" --print-schedule) || fail "simulate without a clip"
clipped=$("$baton" simulate "${S[@]}" --print-schedule --clip-grad-norm 1) || fail "simulate --clip-grad-norm 1"
[ "$(printf '%s' "$clipped" | grep -o CLIP_NORM | wc -l)" -gt 0 ] || fail "no CLIP_NORM: $clipped"
[ "$(printf '%s' "$plain" | grep -o CLIP_NORM | wc -l)" -eq 0 ] || fail "a CLIP_NORM without the flag"
expect_bad_input_of simulate "--clip-grad-norm: must be a finite number > 0, got 0" "${S[@]}" --clip-grad-norm 0
expect_bad_input_of simulate "--clip-grad-norm" "${S[@]}" --clip-grad-norm

for bad in 0 -1 nan inf x; do
  expect_bad_input "--clip-grad-norm: must be a finite norm above 0, got $bad" "${T[@]}" --clip-grad-norm "$bad"
done
printf 'clip_grad_norm = 0.0\n' > "$tmp/zero.toml"
expect_bad_input 'key "clip_grad_norm" must be a finite norm above 0' "${T[@]}" --config "$tmp/zero.toml"
for schedule in 2bw pipedream async; do
  expect_bad_input "schedule \"$schedule\" has no flush between steps" \
    "${J[@]}" --hidden 16 --steps 2 --schedule "$schedule" --clip-grad-norm 1
done

# The manifest records the clip; a resume that changes it is refused unless allowed.
timeout 300 "$baton" train "${T[@]}" --threads 1 --clip-grad-norm 1 --save "$tmp/ck" > "$tmp/save.out" 2>&1 \
  || fail "save: $(tail -3 "$tmp/save.out")"
R=("${J[@]}" --hidden 16 --steps 3 --resume "$tmp/ck")
expect_bad_input "was saved with --clip-grad-norm 1.0 but this run has --clip-grad-norm 0.5" \
  "${R[@]}" --clip-grad-norm 0.5
# Regression (issue 30, item 13): no clipping is named as such, not as a refused value.
expect_bad_input "was saved with --clip-grad-norm 1.0 but this run has no clipping" "${R[@]}"
timeout 300 "$baton" train "${R[@]}" --threads 1 --clip-grad-norm 0.5 --allow-resume-change clip-grad-norm \
  > "$tmp/allowed.out" 2>&1 || fail "an allowed change was refused: $(tail -3 "$tmp/allowed.out")"
echo "1 passed, 0 failed"
