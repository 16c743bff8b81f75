#!/usr/bin/env bash
# `baton train --tie-embeddings`: gpt with one matrix for its token embedding
# and LM head gives the same losses on one process and on 2 stages (the
# copies on two ranks, summed by REDUCE_TIED; also with chimera, whose stages
# are replicated, and dp 2), and other losses than untied; a model without an
# embedding, or a schedule without a flush, gets one line and exit 2.
source "$(dirname "$0")/lib/common.sh"
G=(--model gpt --layers 2 --hidden 32 --heads 4 --context 16 --microbatches 2 --steps 3 --threads 1)

run() {  # run <name> args...: trains, metrics into $tmp/<name>.jsonl
  local name=$1; shift
  timeout 300 "$baton" train "${G[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
run one --batch 8 --pp 1 --tie-embeddings
run untied --batch 8 --pp 1
run pp2 --batch 8 --pp 2 --nproc 2 --tie-embeddings
run chimera --batch 8 --pp 2 --nproc 2 --tie-embeddings --schedule chimera
run dp2_pp2 --dp 2 --pp 2 --batch 16 --nproc 4 --tie-embeddings
run one16 --pp 1 --batch 16 --tie-embeddings
python3 - "$tmp" <<'PY' || fail "losses"
import json, sys
def losses(name):
    return [json.loads(l)["loss"] for l in open(f"{sys.argv[1]}/{name}.jsonl") if '"step"' in l]
def same(a, b):
    return len(a) == 3 and len(b) == 3 and all(abs(x - y) <= 1e-5 * abs(y) for x, y in zip(a, b))
one = losses("one")
for name in ("pp2", "chimera"):
    assert same(losses(name), one), (name, losses(name), one)
assert same(losses("dp2_pp2"), losses("one16")), (losses("dp2_pp2"), losses("one16"))
# The first loss (same initial weights) matches; training then differs.
untied = losses("untied")
assert abs(untied[1] - one[1]) > 1e-4 * abs(one[1]), (untied, one)
PY

expect_bad_input "tie_embeddings ties gpt's and llama's token embedding and LM head; model 'mlp' has no embedding to tie" \
  --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --steps 1 --pp 1 --tie-embeddings
expect_bad_input "--schedule 2bw has no flush between steps and cannot --tie-embeddings" "${G[@]}" --batch 8 --pp 2 --nproc 2 --schedule 2bw --tie-embeddings
echo "ok"
