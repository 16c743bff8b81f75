#!/usr/bin/env bash
# Issue 33: --recompute selective on the gpt at s = 256, h = 256, 8 heads.
# Independent sources: the run without it (the losses of every step equal bit
# for bit, as the region recomputes the same operations) and the formula of
# what selective stops keeping, the attention probabilities P = B_mb x heads
# x s^2 floats and the GELU's output G = B_mb x s x 4h floats per block and
# micro-batch in flight. Under GPipe both micro-batches are in flight at each
# rank's peak (one block a rank), so the counting allocator's activations
# there must lose between (m - 1) (P + G) (the backward in flight holds its
# recomputed tensors for a moment) and m (P + G). The
# activation model's prediction holds within 10% of the allocator with it,
# as without.
# Refused, one line and exit 2, on a model without marked regions.
source "$(dirname "$0")/lib/common.sh"

gpt=(--model gpt --layers 2 --hidden 256 --heads 8 --context 256 --batch 8 --microbatches 2
     --pp 2 --nproc 2 --threads 1 --steps 3 --log-every 100 --schedule gpipe)
for mode in never selective; do
  "$baton" train "${gpt[@]}" --recompute "$mode" --metrics "$tmp/$mode.jsonl" > "$tmp/$mode.out" 2>&1 ||
    fail "$mode: $(tail -3 "$tmp/$mode.out")"
done
python3 - "$tmp/never.jsonl" "$tmp/selective.jsonl" <<'PY' || fail "selective against never"
import json, sys
def lines(path):
    return [json.loads(l) for l in open(path)]
never, selective = lines(sys.argv[1]), lines(sys.argv[2])
losses = lambda ls: [l["loss"] for l in ls if "loss" in l and "step" in l]
assert losses(never) and losses(never) == losses(selective), (losses(never), losses(selective))
final = lambda ls: [l for l in ls if "final" in l][-1]["memory"]
probabilities = 4 * 8 * 256 * 256 * 4  # B_mb x heads x s^2 floats: one block, one micro-batch
gelu = 4 * 256 * 4 * 256 * 4  # B_mb x s x 4h floats
in_flight = 2
for n, s in zip(final(never), final(selective)):
    dropped = n["measured"]["activations"] - s["measured"]["activations"]
    assert (in_flight - 1) * (probabilities + gelu) <= dropped <= in_flight * (probabilities + gelu), (
        n["rank"], dropped, probabilities + gelu)
    for m in (n, s):
        ratio = m["predicted_peak_bytes"] / m["measured_peak_bytes"]
        assert abs(ratio - 1) <= 0.10, (m["rank"], ratio)
    print("rank", n["rank"], "activations at the peak", n["measured"]["activations"], "->",
          s["measured"]["activations"], f"({1 - s['measured']['activations'] / n['measured']['activations']:.1%} less)")
PY
# The split backward (zero-bubble: the region's backward runs in I) and the
# V schedules, on gpt and llama: every step's loss bit for bit.
small=(--layers 4 --hidden 32 --heads 4 --context 16 --batch 16 --microbatches 4 --pp 2 --nproc 2
       --threads 1 --steps 3 --log-every 100)
for run in "gpt zb-h1" "gpt dualpipev" "llama zb-v"; do
  set -- $run
  for mode in never selective; do
    "$baton" train --model "$1" --schedule "$2" "${small[@]}" --recompute "$mode" \
      --metrics "$tmp/$1-$2-$mode.jsonl" > "$tmp/out" 2>&1 || fail "$run $mode: $(tail -2 "$tmp/out")"
  done
  [ "$(grep -c '"loss"' "$tmp/$1-$2-never.jsonl")" -ge 3 ] || fail "$run: no losses in --metrics"
  cmp -s <(grep -o '"loss":[^,]*' "$tmp/$1-$2-never.jsonl") \
         <(grep -o '"loss":[^,]*' "$tmp/$1-$2-selective.jsonl") || fail "$run: losses differ"
done
expect_bad_input "model mlp marks none" --model mlp --recompute selective --steps 1
echo ok
