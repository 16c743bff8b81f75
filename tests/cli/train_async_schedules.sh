#!/usr/bin/env bash
# `baton train --schedule 2bw` (PipeDream-2BW: no flush, weights one update
# stale): two ranks train the same losses as one rank running the same
# staleness (pp = 1 carries nothing but keeps the one-step-stale updates), the
# first step's loss is 1F1B's (nothing has been applied yet), and the
# combinations it does not support get one line and exit 2.
# `--schedule pipedream` (weight stashing, an update per micro-batch; its
# losses are held to a hand-replayed reference in tests/pipeline and
# tests/runtime): through the CLI it trains (the loss falls) and rank r of 2
# reports 2 - r weight versions held.
source "$(dirname "$0")/lib/common.sh"

base=(--model mlp --layers 4 --hidden 32 --batch 16 --microbatches 4 --optimizer sgd --lr 0.05 --threads 1)
job=("${base[@]}" --steps 6)
run() {  # run <name> args...
  local name=$1; shift
  timeout 300 "$baton" train "${job[@]}" --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
run pp2 --schedule 2bw --pp 2 --nproc 2
run pp1 --schedule 2bw --pp 1
run flush --schedule 1f1b --pp 2 --nproc 2
python3 - "$tmp" <<'PY' || fail "2bw losses"
import json, sys
def losses(name):
    return [json.loads(l)["loss"] for l in open(f"{sys.argv[1]}/{name}.jsonl") if '"step"' in l]
pp2, pp1, flush = losses("pp2"), losses("pp1"), losses("flush")
assert len(pp2) == len(pp1) == len(flush) == 6, (pp2, pp1, flush)
for a, b in zip(pp2, pp1):
    assert abs(a - b) <= 1e-5 * abs(b), (pp2, pp1)
assert abs(pp2[0] - flush[0]) <= 1e-6 * abs(flush[0]), (pp2[0], flush[0])
# After step 1 the flushed run has applied one update and 2bw none.
assert abs(pp2[1] - flush[1]) > 1e-6 * abs(flush[1]), (pp2, flush)
print("2bw", pp2, "1f1b", flush)
PY
grep -q "test accuracy" "$tmp/pp2.out" || fail "no test accuracy: $(tail -3 "$tmp/pp2.out")"
grep -q "rank 0: parameters .*, weight versions 2," "$tmp/pp2.out" || fail "2bw rank 0 versions: $(tail -3 "$tmp/pp2.out")"

job=("${base[@]}" --steps 20)
run pipedream --schedule pipedream --pp 2 --nproc 2
run async --schedule async --pp 2 --nproc 2
python3 - "$tmp" <<'PY' || fail "pipedream / async"
import json, sys
for name, versions in (("pipedream", [2, 1]), ("async", [1, 1])):
    lines = [json.loads(l) for l in open(f"{sys.argv[1]}/{name}.jsonl")]
    losses = [l["loss"] for l in lines if "step" in l]
    final = next(l for l in lines if l.get("final"))
    assert len(losses) == 20 and sum(losses[-5:]) < sum(losses[:5]), (name, losses)
    assert [m["weight_versions"] for m in final["memory"]] == versions, (name, final["memory"])
    print(name, losses[0], "->", losses[-1])
PY

expect_bad_input "2bw needs at least pp micro-batches" --model mlp --layers 4 --hidden 16 --batch 8 \
  --microbatches 1 --steps 2 --pp 2 --nproc 2 --schedule 2bw
expect_bad_input "--schedule 2bw has no flush between steps and runs with --dp 1 --tp 1 only" \
  --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --steps 2 --dp 2 --pp 1 --nproc 2 --schedule 2bw
expect_bad_input "--schedule 2bw cannot --save or --resume" "${T[@]}" --schedule 2bw --save "$tmp/ck"
expect_bad_input "--compare-sim compares one flushed step" "${T[@]}" --schedule 2bw --compare-sim
expect_bad_input "--schedule pipedream cannot --save or --resume" "${T[@]}" --schedule pipedream --save "$tmp/ck"
expect_bad_input "pipedream needs at least pp micro-batches" --model mlp --layers 4 --hidden 16 --batch 8 \
  --microbatches 1 --steps 2 --pp 2 --nproc 2 --schedule pipedream
echo "ok"
