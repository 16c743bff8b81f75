#!/usr/bin/env bash
# --balance memory cuts by what each layer keeps for its backward, measured
# by the counting allocator (sim::layer_kept_bytes), not by its input (issue
# 32: a transformer block keeps ~15x its input). On a 1F1B gpt of 8 layers,
# rank 0 holds two micro-batches in flight and rank 1 one: by kept bytes the
# cut moves layers to rank 1 (by inputs it stayed 4,4, as uniform). The
# check is the allocator's own figure: the busiest rank's activations at its
# peak fall by at least 20% against the uniform cut. Bytes, no timing.
source "$(dirname "$0")/lib/common.sh"

run() {  # run <balance>: the cut on stdout, the metrics in $tmp/<balance>.jsonl
  "$baton" train --model gpt --layers 6 --hidden 64 --heads 4 --context 64 --batch 16 \
    --microbatches 4 --pp 2 --nproc 2 --threads 1 --steps 3 --log-every 100 \
    --balance "$1" --metrics "$tmp/$1.jsonl" > "$tmp/$1.out" 2>&1 || fail "$1: $(tail -3 "$tmp/$1.out")"
  grep -oE "balance $1 -> [0-9,]+" "$tmp/$1.out"
}
run uniform | grep -q "balance uniform -> 4,4" || fail "uniform did not cut 4,4: $(cat "$tmp/uniform.out")"
cut=$(run memory)
[ "$cut" != "balance memory -> 4,4," ] || fail "--balance memory cut as uniform does (4,4)"
python3 - "$tmp/uniform.jsonl" "$tmp/memory.jsonl" <<'PY' || fail "the busiest rank's activations did not fall"
import json, sys
def busiest(path):
    final = [json.loads(l) for l in open(path) if '"final"' in l][-1]
    return max(m["measured"]["activations"] for m in final["memory"])
uniform, memory = busiest(sys.argv[1]), busiest(sys.argv[2])
print(f"busiest rank's activations: uniform {uniform / 1e6:.2f} MB, memory {memory / 1e6:.2f} MB "
      f"({memory / uniform:.3f})")
sys.exit(0 if memory <= 0.8 * uniform else 1)
PY
echo "$cut"
echo "ok"
