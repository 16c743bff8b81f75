#!/usr/bin/env bash
# `baton train --dp 2 --overlap-grad-reduce off` moves every REDUCE_GRAD to the
# end of its rank's actions: the same sums in the same order, so the losses
# are bitwise those of the default (on), for a schedule where the pass does
# overlap (interleaved: a rank's second chunk reduces while its first still
# computes); every metrics step line reports reduce_wait_ms >= 0; a value
# other than on/off (true/false) gets one line and exit 2.
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
print("losses", [r["loss"] for r in on])
PY
expect_bad_input "--overlap-grad-reduce" "${T[@]}" --overlap-grad-reduce maybe
echo "ok"
