#!/usr/bin/env bash
# Issues 32 and 33: `baton plan --profile`'s memory per GPU against the
# counting allocator. The gpt is profiled on one rank (--profile-out writes
# what each layer keeps from its F to its B, measured by the allocator), then
# trained on dp 2 x pp 2 under ZeRO 0, 1 and 3 with Adam; the plan of that
# layout predicts the busiest rank's peak within 10% (it models the state,
# the stashes and the boundaries, not the transports' buffers or the
# backward's temporaries), and the savings of ZeRO-1 and ZeRO-3 over ZeRO-0
# within 5% (2 + 2/d and 2 + 3/d bytes per parameter byte against 4).
# Bytes only: no timing.
source "$(dirname "$0")/lib/common.sh"

gpt=(--model gpt --layers 4 --hidden 128 --heads 4 --context 64 --threads 1 --optimizer adam)
timeout 300 "$baton" train "${gpt[@]}" --batch 8 --microbatches 4 --profile-out "$tmp/p.json" \
  > "$tmp/p.out" 2>&1 || fail "profile: $(tail -3 "$tmp/p.out")"
for z in 0 1 3; do
  timeout 300 "$baton" train "${gpt[@]}" --batch 16 --microbatches 4 --dp 2 --pp 2 --nproc 4 \
    --zero $z --steps 4 --log-every 100 --metrics "$tmp/z$z.jsonl" > "$tmp/z$z.out" 2>&1 ||
    fail "--zero $z: $(tail -3 "$tmp/z$z.out")"
  "$baton" plan --profile "$tmp/p.json" --gpus 4 --gpus-per-node 4 --gpu-memory-gb 64 \
    --batch 16 --microbatch 2 --dp 2 --pp 2 --tp 1 --schedules 1f1b --zero $z --json \
    > "$tmp/plan$z.json" || fail "plan --zero $z"
done
python3 - "$tmp" <<'PY' || fail "the plan's memory is off the allocator's"
import json, sys
tmp = sys.argv[1]
def measured(z):
    final = [json.loads(l) for l in open(f"{tmp}/z{z}.jsonl") if '"final"' in l][-1]
    return max(m["measured_peak_bytes"] for m in final["memory"])
def planned(z):
    return json.load(open(f"{tmp}/plan{z}.json"))["plans"][0]["memory_gb"] * 1e9
for z in (0, 1, 3):
    r = planned(z) / measured(z)
    print(f"--zero {z}: planned {planned(z):.0f} measured {measured(z):.0f} ({r:.3f})")
    assert 0.90 <= r <= 1.10, (z, r)
for z in (1, 3):
    saving = (planned(0) - planned(z)) / (measured(0) - measured(z))
    print(f"ZeRO-{z}'s saving, planned / measured: {saving:.3f}")
    assert abs(saving - 1) <= 0.05, (z, saving)
PY
echo ok
