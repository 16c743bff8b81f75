#!/usr/bin/env bash
# `baton train --tp`: the gpt model with its blocks split over 2 tensor-parallel
# ranks, alone and inside a 2-stage pipeline (also with recomputation and the
# split backward of zb-h1), reports the losses of one process
# (within 1e-5); checkpoints hold whole layers, so a tp=2 save resumes at
# tp=2 bitwise and at tp=1 within 1e-6 relative, and a tp=1 save at tp=2; bad
# grids get one line and exit 2. `--model mlp --tp 2` splits its Linears in
# column/row pairs and reports the losses of one process.
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

# Checkpoints: K is G without --steps.
K=(--model gpt --layers 2 --hidden 32 --heads 4 --context 16 --batch 8 --microbatches 2 --threads 1)
ck() {  # ck <name> args...: as run, with K
  local name=$1; shift
  timeout 300 "$baton" train "${K[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
ck tp_straight --pp 2 --tp 2 --nproc 4 --steps 4
ck tp_half --pp 2 --tp 2 --nproc 4 --steps 2 --save "$tmp/ck_tp"
ck tp_resumed --pp 2 --tp 2 --nproc 4 --steps 4 --resume "$tmp/ck_tp"
ck tp1_resumed --pp 1 --steps 4 --resume "$tmp/ck_tp"
ck one_straight --pp 1 --steps 4
ck one_half --pp 1 --steps 2 --save "$tmp/ck_one"
ck tp2_resumed --pp 1 --tp 2 --nproc 2 --steps 4 --resume "$tmp/ck_one"
python3 - "$tmp" <<'PY' || fail "resumed losses differ"
import json, sys
tmp = sys.argv[1]
def losses(name):
    return {d["step"]: d["loss"] for d in map(json.loads, open(f"{tmp}/{name}.jsonl")) if "step" in d}
def tail(name):
    return {s: l for s, l in losses(name).items() if s > 2}
assert tail("tp_resumed") == tail("tp_straight"), ("same layout, not bitwise", tail("tp_resumed"), tail("tp_straight"))
for got, want in (("tp1_resumed", "tp_straight"), ("tp2_resumed", "one_straight")):
    g, w = losses(got), tail(want)
    assert sorted(g) == [3, 4], (got, g)
    assert all(abs(g[s] - w[s]) <= 1e-6 * abs(w[s]) for s in g), (got, g, w)
PY
# The files name the same tensors, of the same whole shapes, whatever the tp.
python3 - "$tmp/ck_tp/manifest.json" "$tmp/ck_one/manifest.json" <<'PY' || fail "a tp=2 save's files differ from tp=1's"
import json, sys
tp, one = (json.load(open(p)) for p in sys.argv[1:])
files = lambda m: {f["path"]: f["tensors"] for f in m["files"]}
assert files(tp) == files(one), (files(tp), files(one))
assert tp["pipeline"]["tp"] == 2 and one["pipeline"]["tp"] == 1
PY

expect_bad_input "--tp 3 must divide --heads 4" "${G[@]}" --pp 1 --tp 3 --nproc 3
expect_bad_input "--tp 2 splits the blocks of gpt and llama and the Linear pairs of mlp; model cnn has none" \
  --model cnn --batch 8 --microbatches 2 --steps 1 --pp 1 --tp 2 --nproc 2
expect_bad_input "--tp 3 must divide --hidden 16" \
  --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --steps 1 --pp 1 --tp 3 --nproc 3

# mlp: column/row Linear pairs, on one stage and across two, as one process.
M0=(--model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --threads 1)
M=("${M0[@]}" --steps 3)
timeout 300 "$baton" train "${M[@]}" --pp 1 --metrics "$tmp/mlp_one.jsonl" > "$tmp/mlp_one.out" 2>&1 \
  || fail "mlp one: $(tail -5 "$tmp/mlp_one.out")"
timeout 300 "$baton" train "${M[@]}" --pp 2 --tp 2 --nproc 4 --metrics "$tmp/mlp_tp2.jsonl" \
  > "$tmp/mlp_tp2.out" 2>&1 || fail "mlp --tp 2: $(tail -5 "$tmp/mlp_tp2.out")"
python3 - "$tmp/mlp_one.jsonl" "$tmp/mlp_tp2.jsonl" <<'PY' || fail "mlp --tp 2 losses differ"
import json, sys
one, tp = ([json.loads(l)["loss"] for l in open(p) if '"step"' in l] for p in sys.argv[1:])
assert len(one) == 3 and len(tp) == 3 and all(abs(a - b) <= 1e-5 * abs(b) for a, b in zip(tp, one)), (tp, one)
PY
# Its checkpoints hold whole layers too: a tp=2 save resumes at tp=1.
timeout 300 "$baton" train "${M0[@]}" --pp 2 --tp 2 --nproc 4 --steps 2 --save "$tmp/ck_mlp" \
  > "$tmp/mlp_save.out" 2>&1 || fail "mlp save: $(tail -5 "$tmp/mlp_save.out")"
timeout 300 "$baton" train "${M[@]}" --pp 1 --resume "$tmp/ck_mlp" --metrics "$tmp/mlp_resumed.jsonl" \
  > "$tmp/mlp_resumed.out" 2>&1 || fail "mlp resume: $(tail -5 "$tmp/mlp_resumed.out")"
python3 - "$tmp/mlp_one.jsonl" "$tmp/mlp_resumed.jsonl" <<'PY' || fail "mlp resumed at tp=1 differs"
import json, sys
one, resumed = ({d["step"]: d["loss"] for d in map(json.loads, open(p)) if "step" in d} for p in sys.argv[1:])
assert sorted(resumed) == [3], resumed
assert abs(resumed[3] - one[3]) <= 1e-6 * abs(one[3]), (resumed, one)
PY
expect_bad_input "dp=1 x pp=2 x tp=2 needs 4 ranks but --nproc is 2" "${G[@]}" --pp 2 --tp 2 --nproc 2
echo "ok"
