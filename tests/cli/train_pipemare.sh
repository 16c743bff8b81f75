#!/usr/bin/env bash
# `baton train --schedule pipemare` (PipeMare: asynchronous 1F1B with a
# learning-rate warm-up and discrepancy correction; its updates are held to a
# replay by hand in tests/pipeline/pipemare_test.cpp): through the CLI it
# trains (the loss falls), reports its stage delays (1,0 on 2 ranks) and the
# copy its delayed stage computes on (2 weight versions on rank 0); with both
# techniques off its losses are async's, bit for bit; bad PipeMare values and
# PipeMare flags given to another schedule get one line and exit 2.
source "$(dirname "$0")/lib/common.sh"

job=(--model mlp --layers 4 --hidden 32 --batch 16 --microbatches 4 --optimizer sgd --lr 0.05
  --threads 1 --pp 2 --nproc 2)
run() {  # run <name> args...
  local name=$1; shift
  timeout 300 "$baton" train "${job[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
run pipemare --schedule pipemare --steps 20 --pipemare-warmup 5
grep -qF "pipemare: stage delays 1,0" "$tmp/pipemare.out" \
  || fail "no delays line: $(head -3 "$tmp/pipemare.out")"
grep -qF "lr warm-up over 5 steps; discrepancy correction on (decay 0.5)" "$tmp/pipemare.out" \
  || fail "settings line: $(head -3 "$tmp/pipemare.out")"
run async --schedule async --steps 6
run off --schedule pipemare --steps 6 --pipemare-warmup 0 --pipemare-correction off
python3 - "$tmp" <<'PY' || fail "pipemare losses"
import json, sys
def read(name):
    lines = [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.jsonl")]
    return [l["loss"] for l in lines if "step" in l], next(l for l in lines if l.get("final"))
losses, final = read("pipemare")
assert len(losses) == 20 and sum(losses[-5:]) < sum(losses[:5]), losses
assert [m["weight_versions"] for m in final["memory"]] == [2, 1], final["memory"]
off, _ = read("off")
async_, _ = read("async")
assert off == async_, (off, async_)
print("pipemare", losses[0], "->", losses[-1], "; off == async:", off)
PY

expect_bad_input "--pipemare-decay: must be a number in [0, 1), got 1" "${T[@]}" --schedule pipemare \
  --pipemare-decay 1
expect_bad_input "--pipemare-warmup: must be an integer in [0," "${T[@]}" --schedule pipemare \
  --pipemare-warmup -1
expect_bad_input "--pipemare-correction" "${T[@]}" --schedule pipemare --pipemare-correction maybe
expect_bad_input "--pipemare-warmup applies to --schedule pipemare only; schedule async" "${T[@]}" \
  --schedule async --pipemare-warmup 10
expect_bad_input "--pipemare-correction applies to --schedule pipemare only" "${T[@]}" \
  --pipemare-correction off
printf 'model = "mlp"\npipemare_decay = 2.0\n' > "$tmp/decay.toml"
expect_bad_input 'key "pipemare_decay" must be in [0, 1), got 2' --config "$tmp/decay.toml" --schedule pipemare
expect_bad_input "--schedule pipemare cannot --save or --resume" "${T[@]}" --schedule pipemare \
  --save "$tmp/ck"
echo "ok"
