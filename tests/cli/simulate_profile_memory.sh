#!/usr/bin/env bash
# Issue 32: `baton simulate --profile` prints each rank's predicted peak by
# category from the layers `baton train --profile-out` measured, and it is
# the prediction `baton train` itself makes and the allocator holds to: the
# gpt is profiled on one rank, then trained on pp 2 under gpipe and 1f1b.
# Per rank, simulate's activations equal the training run's predicted
# activations (the same memory model on the same measured layers, 1%), its
# peak is within 10% of the counting allocator's measured peak less what the
# profile cannot know (the data batch and the transports' buffers: the
# allocator's "other"), and gpipe holds more on rank 0 than 1f1b (m against
# p micro-batches). A profile without the measured memory is refused in one
# line. Bytes only: no timing.
source "$(dirname "$0")/lib/common.sh"

gpt=(--model gpt --layers 4 --hidden 64 --heads 4 --context 32 --threads 1 --optimizer adam
  --batch 16 --microbatches 4)
timeout 300 "$baton" train "${gpt[@]}" --profile-out "$tmp/p.json" > "$tmp/p.out" 2>&1 ||
  fail "profile: $(tail -3 "$tmp/p.out")"
for s in gpipe 1f1b; do
  timeout 300 "$baton" train "${gpt[@]}" --pp 2 --nproc 2 --schedule $s --steps 4 \
    --log-every 100 --metrics "$tmp/$s.jsonl" > "$tmp/$s.out" 2>&1 ||
    fail "train $s: $(tail -3 "$tmp/$s.out")"
  "$baton" simulate --profile "$tmp/p.json" --pp 2 --microbatches 4 --schedule $s --json \
    > "$tmp/sim_$s.json" 2> "$tmp/sim_$s.err" || fail "simulate $s: $(cat "$tmp/sim_$s.err")"
done
"$baton" simulate --profile "$tmp/p.json" --pp 2 --microbatches 4 > "$tmp/text.out" ||
  fail "simulate --profile, text"
grep -q "^rank  peak MiB  parameters" "$tmp/text.out" || fail "no memory table: $(cat "$tmp/text.out")"
python3 - "$tmp" <<'PY' || fail "simulate's memory is off the run's"
import json, sys
tmp = sys.argv[1]
rank0 = {}
for s in ("gpipe", "1f1b"):
    final = [json.loads(l) for l in open(f"{tmp}/{s}.jsonl") if '"final"' in l][-1]["memory"]
    sim = json.load(open(f"{tmp}/sim_{s}.json"))["memory"]
    assert len(sim) == 2, sim
    for run, pred in zip(sorted(final, key=lambda m: m["rank"]), sim):
        a, b = pred["predicted"]["activations"], run["predicted"]["activations"]
        measured = run["measured_peak_bytes"] - run["measured"].get("other", 0)
        print(f"{s} rank {pred['rank']}: activations {a:.0f} / run's prediction {b:.0f}; "
              f"peak {pred['predicted_peak_bytes']:.0f} / allocator less other {measured:.0f} "
              f"({pred['predicted_peak_bytes'] / measured:.3f})")
        assert abs(a - b) <= 0.01 * b, (s, pred["rank"], a, b)
        assert 0.90 <= pred["predicted_peak_bytes"] / measured <= 1.10, (s, pred["rank"])
    rank0[s] = sim[0]["predicted"]["activations"]
assert rank0["gpipe"] > rank0["1f1b"], rank0
PY
# The SVG draws each rank's memory under the timeline: a lane per rank whose
# peak is the table's predicted peak (the walk's most), and the Chrome trace
# carries the same points as counters.
"$baton" simulate --profile "$tmp/p.json" --pp 2 --microbatches 4 --schedule gpipe \
  --svg "$tmp/memory.svg" --trace "$tmp/memory.json" > /dev/null || fail "simulate --profile --svg"
python3 - "$tmp" <<'PY' || fail "the SVG's memory lanes are not the prediction"
import json, re, sys
tmp = sys.argv[1]
svg = open(f"{tmp}/memory.svg").read()
peaks = re.findall(r'<path class="memory" d="[^"]*"[^>]*><title>rank (\d+): peak ([0-9.]+) MiB', svg)
sim = json.load(open(f"{tmp}/sim_gpipe.json"))["memory"]
assert len(peaks) == 2, peaks
for rank, mib in peaks:
    want = f'{sim[int(rank)]["predicted_peak_bytes"] / 1048576:.2f}'
    print(f"rank {rank}: lane peak {mib} MiB, predicted {want} MiB")
    assert mib == want, (rank, mib, want)
counters = [e for e in json.load(open(f"{tmp}/memory.json"))["traceEvents"] if e["ph"] == "C"]
assert {e["name"] for e in counters} == {"memory rank 0", "memory rank 1"}, counters
PY
# A profile written before --profile-out measured memory.
python3 -c "
import json, sys
p = json.load(open(sys.argv[1])); del p['memory']; json.dump(p, open(sys.argv[2], 'w'))" \
  "$tmp/p.json" "$tmp/old.json"
expect_bad_input_of simulate "records no measured memory" --profile "$tmp/old.json"
expect_bad_input_of simulate "predicts whole layers' memory (tp = 1)" --profile "$tmp/p.json" \
  --tp 2

# One replica of dp 2 under ZeRO-1 and ZeRO-3: the batch doubled, so that a
# replica's micro-batch is the profiled one. Each rank's parameters,
# gradients and optimizer state are the run's own prediction (which counts
# its real shards, padding included: 1%), and the peak is within 10% of the
# allocator's less "other", as above.
for z in 1 3; do
  timeout 300 "$baton" train "${gpt[@]/16/32}" --dp 2 --zero $z --pp 2 --nproc 4 --schedule 1f1b \
    --steps 4 --log-every 100 --metrics "$tmp/dp$z.jsonl" > "$tmp/dp$z.out" 2>&1 ||
    fail "train dp 2 zero $z: $(tail -3 "$tmp/dp$z.out")"
  "$baton" simulate --profile "$tmp/p.json" --pp 2 --dp 2 --zero $z --microbatches 4 \
    --schedule 1f1b --json > "$tmp/sim_dp$z.json" || fail "simulate --dp 2 --zero $z"
done
python3 - "$tmp" <<'PY' || fail "simulate's memory is off the dp 2 run's"
import json, sys
tmp = sys.argv[1]
for z in (1, 3):
    final = [json.loads(l) for l in open(f"{tmp}/dp{z}.jsonl") if '"final"' in l][-1]["memory"]
    sim = json.load(open(f"{tmp}/sim_dp{z}.json"))["memory"]
    assert len(final) == 4 and len(sim) == 2, (final, sim)
    for run in final:
        pred = sim[run["rank"] // 2]  # rank = pp_index * dp + dp_index (topology.h)
        for part in ("parameters", "gradients", "optimizer"):
            a, b = pred["predicted"][part], run["predicted"][part]
            print(f"zero {z} rank {run['rank']} {part}: simulate {a:.0f} / run's prediction {b:.0f}")
            assert abs(a - b) <= 0.01 * b, (z, run["rank"], part, a, b)
        # The weights at the peak, by the allocator's category: under ZeRO-3
        # the shard (held all along) beside the gathered stage, as predicted.
        a, b = run["measured"]["parameters"], run["predicted"]["parameters"]
        print(f"zero {z} rank {run['rank']} parameters at the peak: allocator {a:.0f} / predicted {b:.0f}")
        assert abs(a - b) <= 0.01 * b, (z, run["rank"], a, b)
        measured = run["measured_peak_bytes"] - run["measured"].get("other", 0)
        ratio = pred["predicted_peak_bytes"] / measured
        print(f"zero {z} rank {run['rank']}: peak / allocator less other {ratio:.3f}")
        assert 0.90 <= ratio <= 1.10, (z, run["rank"], ratio)
PY
echo ok
