#!/usr/bin/env bash
# End-to-end `baton train` on the local launcher: every model trains for a few
# steps; metrics, the measured timeline (trace, SVG) and --compare-sim appear;
# a TOML config is read and flags override it.
set -u
baton=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# GPT on 2 ranks with ZB-H1 (I/W split), metrics as JSON lines.
timeout 300 "$baton" train --model gpt --layers 2 --hidden 32 --heads 2 --context 16 --pp 2 --nproc 2 \
  --schedule zb-h1 --microbatches 4 --batch 8 --steps 6 --threads 1 --metrics "$tmp/gpt.jsonl" \
  > "$tmp/gpt.out" 2>&1 || fail "gpt run: $(tail -5 "$tmp/gpt.out")"
[ "$(grep -c '"step"' "$tmp/gpt.jsonl")" -ge 6 ] || fail "gpt metrics: $(cat "$tmp/gpt.jsonl")"
grep -q '"samples_per_s"' "$tmp/gpt.jsonl" || fail "gpt metrics lack samples_per_s"
grep -q '\[rank 0\] step 6/6  loss' "$tmp/gpt.out" || fail "gpt progress line: $(cat "$tmp/gpt.out")"
grep -q 'ETA' "$tmp/gpt.out" || fail "gpt progress has no ETA"
# Memory per rank (issue 8.1): a line per rank at the end and the final metrics line's fields.
for r in 0 1; do
  grep -qE "\[rank 0\] rank $r: parameters [0-9.]+ [kMG]?B, gradients [0-9.]+ [kMG]?B, optimizer [0-9.]+ [kMG]?B, peak activations [0-9.]+ [kMG]?B, peak RSS [0-9.]+ [kMG]?B" "$tmp/gpt.out" \
    || fail "no memory line for rank $r: $(tail -4 "$tmp/gpt.out")"
done
python3 - "$tmp/gpt.jsonl" <<'PY' || fail "final metrics line lacks memory: $(tail -1 "$tmp/gpt.jsonl")"
import json, sys
final = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][0]
memory = final["memory"]
assert [m["rank"] for m in memory] == [0, 1], memory
for m in memory:
    assert m["parameter_bytes"] > 0 and m["gradient_bytes"] == m["parameter_bytes"], m
    assert m["optimizer_bytes"] == 2 * m["parameter_bytes"], m  # Adam: two moments
    assert m["peak_activation_bytes"] > 0 and m["peak_rss_bytes"] > 1e6, m
PY

# The MLP with interleaved 1F1B, recomputation, trace, SVG and compare-sim, from a config.
cat > "$tmp/mlp.toml" <<'TOML'
model = "mlp"
layers = 8
hidden = 32
in_features = 16
pp = 2
schedule = "gpipe"
microbatches = 4
batch = 32
steps = 4
TOML
timeout 300 "$baton" train --config "$tmp/mlp.toml" --schedule interleaved --recompute except_last \
  --nproc 2 --threads 1 --trace "$tmp/t.json" --svg "$tmp/t.svg" --compare-sim \
  > "$tmp/mlp.out" 2>&1 || fail "mlp run: $(tail -5 "$tmp/mlp.out")"
grep -q "schedule interleaved.*recompute except_last" "$tmp/mlp.out" || fail "flag did not override the config: $(head -2 "$tmp/mlp.out")"
grep -q "traceEvents" "$tmp/t.json" || fail "no chrome trace"
grep -q "<svg" "$tmp/t.svg" || fail "no svg"
grep -q "measured" "$tmp/t.svg" || fail "svg title does not say measured"
grep -qE "compare-sim: link [0-9.]+ us \+ [0-9.]+ GB/s; measured step [0-9.]+ ms, simulated [0-9.]+ ms .*bubble measured [0-9.]+%, simulated [0-9.]+%" "$tmp/mlp.out" \
  || fail "no compare-sim line with the probed link and both bubbles: $(grep compare-sim "$tmp/mlp.out")"
grep -qE "compare-sim: largest start deviation [-+][0-9.]+ ms at rank [01] [0-9]+[FBIW][0-9]+" "$tmp/mlp.out" \
  || fail "no action-by-action deviation: $(grep compare-sim "$tmp/mlp.out")"
# Every one of the 4 steps is compared (at most the last 5 are): the median
# and the last step's efficiency lie within the range the line gives.
python3 - "$tmp/mlp.out" <<'PY' || fail "compare-sim's median line: $(grep compare-sim "$tmp/mlp.out")"
import re, sys
out = open(sys.argv[1]).read()
last = float(re.search(r"\(efficiency ([0-9.]+)%\)", out).group(1))
m = re.search(r"compare-sim: over the last 4 steps, each after a barrier: efficiency median "
              r"([0-9.]+)% \(([0-9.]+)% to ([0-9.]+)%\); bubble median measured ([0-9.]+)%, "
              r"simulated ([0-9.]+)%", out)
assert m, "no median line over 4 steps"
median, low, high = (float(m.group(i)) for i in (1, 2, 3))
assert low <= median <= high and low <= last <= high, (low, median, last, high)
PY
grep -q "test accuracy" "$tmp/mlp.out" || fail "no accuracy line"
# --test-set off: the same steps, and no test-set pass after them.
timeout 300 "$baton" train --config "$tmp/mlp.toml" --nproc 2 --threads 1 --metrics "$tmp/on.jsonl" \
  > "$tmp/on.out" 2>&1 || fail "mlp run: $(tail -5 "$tmp/on.out")"
timeout 300 "$baton" train --config "$tmp/mlp.toml" --nproc 2 --threads 1 --metrics "$tmp/off.jsonl" \
  --test-set off > "$tmp/off.out" 2>&1 || fail "mlp --test-set off: $(tail -5 "$tmp/off.out")"
grep -q "test accuracy" "$tmp/on.out" || fail "no accuracy line by default: $(tail -3 "$tmp/on.out")"
! grep -q "test accuracy" "$tmp/off.out" || fail "--test-set off printed an accuracy"
grep -q '"test_accuracy"' "$tmp/on.jsonl" || fail "no test_accuracy in the final line"
! grep -q '"test_accuracy"' "$tmp/off.jsonl" || fail "--test-set off wrote a test_accuracy"
[ "$(grep -o '"loss":[^,]*' "$tmp/on.jsonl")" = "$(grep -o '"loss":[^,]*' "$tmp/off.jsonl")" ] \
  || fail "--test-set off changed the losses"

# Chimera: replicated stages on 2 ranks train and agree.
timeout 300 "$baton" train --model mlp --layers 4 --hidden 16 --in-features 8 --pp 2 --nproc 2 \
  --schedule chimera --microbatches 4 --batch 16 --steps 3 --threads 1 > "$tmp/chimera.out" 2>&1 \
  || fail "chimera run: $(tail -5 "$tmp/chimera.out")"
echo "1 passed, 0 failed"
