#!/usr/bin/env bash
# `baton train --dp 2 --overlap-grad-reduce off` moves every REDUCE_GRAD to the
# end of its rank's actions: the same sums in the same order, so the losses
# are bitwise those of the default (on), for a schedule where the pass does
# overlap (interleaved: a rank's second chunk reduces while its first still
# computes); every metrics step line reports reduce_wait_ms >= 0, and the
# all-reduce time reduce_ms > 0 with its exposed part reduce_exposed_ms, which
# with the overlap off is all of it (every REDUCE_GRAD starts after the last
# compute); the final line has both per rank; --compare-sim prints them per
# rank against the simulator's; a value other than on/off (true/false) gets
# one line and exit 2.
source "$(dirname "$0")/lib/common.sh"

for o in on off; do
  timeout 300 "$baton" train --model mlp --layers 8 --hidden 64 --batch 32 --microbatches 4 --dp 2 --pp 1 \
    --nproc 2 --schedule interleaved --steps 4 --threads 1 --overlap-grad-reduce "$o" --metrics "$tmp/$o.jsonl" \
    > "$tmp/$o.out" 2>&1 || fail "--overlap-grad-reduce $o: $(tail -5 "$tmp/$o.out")"
done
python3 - "$tmp" <<'PY' || fail "overlap on and off differ"
import json, sys
def rows(o):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{o}.jsonl") if '"step"' in l]
on, off = rows("on"), rows("off")
assert len(on) == len(off) == 4, (on, off)
assert [r["loss"] for r in on] == [r["loss"] for r in off], (on, off)
assert all(r["reduce_wait_ms"] >= 0 for r in on + off), (on, off)
assert all(r["reduce_ms"] > 0 and r["reduce_exposed_ms"] >= 0 for r in on + off), (on, off)
assert all(r["reduce_exposed_ms"] >= r["reduce_ms"] - 1e-6 for r in off), off
for o in ("on", "off"):
    final = [json.loads(l) for l in open(f"{sys.argv[1]}/{o}.jsonl") if '"final"' in l][0]
    assert [m["rank"] for m in final["memory"]] == [0, 1], final
    assert all(m["reduction_ms"] > 0 for m in final["memory"]), final
print("losses", [r["loss"] for r in on])
PY
out=$(timeout 300 "$baton" train --model mlp --layers 8 --hidden 64 --batch 32 --microbatches 4 --dp 2 \
  --pp 1 --nproc 2 --schedule interleaved --steps 3 --threads 1 --compare-sim 2>&1) \
  || fail "--compare-sim with dp 2: $out"
for r in 0 1; do
  printf '%s' "$out" | grep -qE "compare-sim: rank $r all-reduce measured [0-9.]+ ms, exposed [0-9.]+ ms \(hidden [0-9.]+%\); simulated [0-9.]+ ms" \
    || fail "--compare-sim printed no all-reduce line for rank $r: $out"
done
expect_bad_input "--overlap-grad-reduce" "${T[@]}" --overlap-grad-reduce maybe
echo "ok"
