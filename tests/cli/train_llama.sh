#!/usr/bin/env bash
# `baton train --model llama`: the Llama-style decoder trains on --text; on 2
# stages (positions crossing the boundary beside the hidden states), with 2
# data-parallel replicas, split over 2 tensor-parallel ranks and with tied
# embeddings on 2 stages it reports the losses of one process (within 1e-5);
# bad tensor-parallel sizes and an odd head dimension get one line and exit 2.
source "$(dirname "$0")/lib/common.sh"
L=(--model llama --layers 2 --hidden 32 --heads 4 --context 16 --batch 8 --microbatches 2 --steps 3 --threads 1)

run() {  # run <name> args...: trains, metrics into $tmp/<name>.jsonl
  local name=$1; shift
  timeout 300 "$baton" train "${L[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
run one --pp 1
run pp2 --pp 2 --nproc 2
run dp2 --pp 1 --dp 2 --nproc 2
run pp2_tp2 --pp 2 --tp 2 --nproc 4
run tied_one --pp 1 --tie-embeddings
run tied_pp2 --pp 2 --nproc 2 --tie-embeddings
grep -q "model llama" "$tmp/pp2.out" || fail "no llama in the banner: $(head -1 "$tmp/pp2.out")"
python3 - "$tmp" <<'PY' || fail "losses differ"
import json, sys
tmp = sys.argv[1]
def losses(name):
    return [json.loads(l)["loss"] for l in open(f"{tmp}/{name}.jsonl") if '"step"' in l]
def same(got, want):
    return len(got) == 3 and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(got, want))
for name in ("pp2", "dp2", "pp2_tp2"):
    assert same(losses(name), losses("one")), (name, losses(name), losses("one"))
assert same(losses("tied_pp2"), losses("tied_one")), (losses("tied_pp2"), losses("tied_one"))
assert losses("one")[2] < losses("one")[0], losses("one")
PY

expect_bad_input "--tp 3 must divide --heads 4" "${L[@]}" --pp 1 --tp 3 --nproc 3
expect_bad_input "--tp 3 must divide llama's SwiGLU width 256" \
  --model llama --layers 2 --hidden 30 --heads 3 --batch 8 --microbatches 2 --steps 1 --pp 1 --tp 3 --nproc 3
expect_bad_input "even head dimension (rotary turns pairs): hidden 36, heads 4" \
  --model llama --hidden 36 --heads 4 --steps 1 --pp 1
expect_bad_input "unknown model \"llama2\" (expected mlp, cnn, gpt, llama or resnet)" --model llama2 --steps 1
echo "ok"
