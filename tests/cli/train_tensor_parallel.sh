#!/usr/bin/env bash
# `baton train --tp`: the gpt model with its blocks split over 2 tensor-parallel
# ranks, alone and inside a 2-stage pipeline (also with recomputation and the
# split backward of zb-h1), reports the losses of one process
# (within 1e-5); bad grids get one line and exit 2.
source "$(dirname "$0")/lib/common.sh"
G=(--model gpt --layers 2 --hidden 32 --heads 4 --context 16 --batch 8 --microbatches 2 --steps 3 --threads 1)

run() {  # run <name> args...: trains, metrics into $tmp/<name>.jsonl
  local name=$1; shift
  timeout 300 "$baton" train "${G[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
run one --pp 1
run tp2 --pp 1 --tp 2 --nproc 2
run pp2_tp2 --pp 2 --tp 2 --nproc 4
run recompute --pp 2 --tp 2 --nproc 4 --recompute always --schedule zb-h1
grep -q "tp=2, pp=2" "$tmp/pp2_tp2.out" || fail "no tp in the banner: $(head -1 "$tmp/pp2_tp2.out")"
python3 - "$tmp/one.jsonl" "$tmp/tp2.jsonl" "$tmp/pp2_tp2.jsonl" "$tmp/recompute.jsonl" <<'PY' || fail "losses differ"
import json, sys
def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if '"step"' in l]
ref = losses(sys.argv[1])
assert len(ref) == 3, ref
for path in sys.argv[2:]:
    got = losses(path)
    assert len(got) == 3 and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, ref)), (path, got, ref)
PY

expect_bad_input "--tp 3 must divide --heads 4" "${G[@]}" --pp 1 --tp 3 --nproc 3
expect_bad_input "--tp 2 splits the gpt model's Transformer blocks; model mlp has none" \
  --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --steps 1 --pp 1 --tp 2 --nproc 2
expect_bad_input "dp=1 x pp=2 x tp=2 needs 4 ranks but --nproc is 2" "${G[@]}" --pp 2 --tp 2 --nproc 2
expect_bad_input "--tp 2 cannot --save or --resume" "${G[@]}" --pp 1 --tp 2 --nproc 2 --save "$tmp/ck"
echo "ok"
