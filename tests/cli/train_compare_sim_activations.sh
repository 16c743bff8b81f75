#!/usr/bin/env bash
# --compare-sim's peak activation line is no longer circular (issue 32): the
# measured side is the counting allocator's activations at rank 0's peak (the
# figure the final memory line prints), the simulated side the simulator fed
# each stage's bytes kept per micro-batch as the layers measured them. On a
# 1F1B gpt (rank 0 holds p = 2 micro-batches in flight) the two agree within
# 10%, and the simulated figure is far above the stages' inputs the line
# used to compare (a block keeps ~15x its input). Bytes, no timing.
source "$(dirname "$0")/lib/common.sh"

out=$("$baton" train --model gpt --layers 4 --hidden 64 --heads 4 --context 64 --batch 16 \
  --microbatches 4 --pp 2 --nproc 2 --threads 1 --steps 4 --log-every 100 --compare-sim \
  --metrics "$tmp/m.jsonl" 2>&1) || fail "the run failed: $out"
line=$(printf '%s\n' "$out" | grep "compare-sim: peak activation bytes on rank 0") \
  || fail "no peak activation line: $out"
printf '%s\n' "$line" | grep -q "the counting allocator's activations at the peak" \
  || fail "the line does not say it reads the allocator: $line"
python3 - "$tmp/m.jsonl" "$line" <<'PY' || fail "measured and simulated activations disagree: $line"
import json, re, sys
final = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][-1]
allocator = final["memory"][0]["measured"]["activations"]
m = re.search(r"measured ([0-9]+), simulated ([0-9]+)", sys.argv[2])
measured, simulated = int(m.group(1)), int(m.group(2))
inputs = final["memory"][0]["peak_stage_input_bytes"]  # the executor's count of stage inputs
print(f"allocator {allocator}, line measured {measured}, simulated {simulated}, inputs {inputs}")
ok = measured == allocator and abs(simulated / measured - 1) <= 0.10 and simulated > 4 * inputs
# The report's own "peak activations" is the allocator's too, not the inputs.
ok = ok and final["memory"][0]["peak_activation_bytes"] == allocator
ok = ok and final["memory"][0]["measured_by"] == "cpu counter"
sys.exit(0 if ok else 1)
PY
