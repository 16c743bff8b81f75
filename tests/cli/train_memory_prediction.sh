#!/usr/bin/env bash
# Issue 32's smaller grid: each rank's predicted peak (the activation model,
# sim/memory_model.h, from layers measured on one micro-batch) within 10% of
# the counting allocator's measured peak over steps 3 on, for the gpt under
# GPipe, 1F1B, interleaved and zb-h1 (its I keeping the measured weight
# stash until W), recomputing or not.
# Bytes are deterministic (no timing). The measured side is independent: the
# allocator counts every byte the rank's steps allocate; the prediction
# composes per-layer figures by the schedule's order. GPipe holds every
# micro-batch's stash and 1F1B about p, so GPipe's predicted peak must also
# be the larger, as the allocator's is.
source "$(dirname "$0")/lib/common.sh"

gpt=(--model gpt --layers 4 --hidden 128 --heads 4 --context 128 --batch 64 --microbatches 8
     --pp 2 --nproc 2 --threads 1 --steps 4 --log-every 100)
check() {  # check <name> <tolerance> <args...>: every rank within it
  local name=$1 tolerance=$2; shift 2
  "$baton" train "$@" --metrics "$tmp/$name.jsonl" > "$tmp/$name.out" 2>&1 ||
    fail "$name: $(tail -3 "$tmp/$name.out")"
  python3 - "$tmp/$name.jsonl" "$name" "$tolerance" <<'PY' || fail "$name: $(grep -E 'predicted|allocator' "$tmp/$name.out")"
import json, sys
final = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][-1]
for m in final["memory"]:
    p, q = m["predicted_peak_bytes"], m["measured_peak_bytes"]
    assert p > 0 and q > 0, m
    tolerance = float(sys.argv[3])
    assert abs(p / q - 1) <= tolerance, f"{sys.argv[2]} rank {m['rank']}: predicted {p} measured {q}"
    assert set(m["predicted"]) == set(m["measured"]) >= {
        "parameters", "gradients", "optimizer", "activations", "buffers"}, m
print(sys.argv[2], [round(m["predicted_peak_bytes"] / m["measured_peak_bytes"], 3)
                    for m in final["memory"]])
PY
}
check gpipe 0.10 "${gpt[@]}" --schedule gpipe
check 1f1b 0.10 "${gpt[@]}" --schedule 1f1b
check interleaved 0.10 "${gpt[@]}" --schedule interleaved
check recompute 0.10 "${gpt[@]}" --schedule 1f1b --recompute always
check zb 0.10 "${gpt[@]}" --schedule zb-h1
# The ordering: GPipe's peak above 1F1B's on both sides, rank by rank.
python3 - "$tmp/gpipe.jsonl" "$tmp/1f1b.jsonl" <<'PY' || fail "gpipe's peak is not above 1f1b's"
import json, sys
def final(path):
    return [json.loads(l) for l in open(path) if '"final"' in l][-1]["memory"]
for g, o in zip(final(sys.argv[1]), final(sys.argv[2])):
    assert g["predicted_peak_bytes"] > o["predicted_peak_bytes"], (g, o)
    assert g["measured_peak_bytes"] > o["measured_peak_bytes"], (g, o)
PY
grep -q "rank 1: predicted peak" "$tmp/1f1b.out" || fail "no predicted line: $(cat "$tmp/1f1b.out")"
echo ok
