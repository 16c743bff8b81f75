#!/usr/bin/env bash
# End-to-end checks of `baton plan`: the JSON, the table, the plot, and one
# line with exit 2 for each kind of bad input.
source "$(dirname "$0")/lib/common.sh"

# GPT-3 175B on 3072 A100s (the issue's case): seconds, not minutes.
GPT3=(--model gpt --layers 96 --hidden 12288 --heads 96 --seq 2048 --vocab 51200
      --gpus 3072 --gpus-per-node 8 --gpu-memory-gb 80 --peak-tflops 312 --batch 1536)
start=$(date +%s)
# Into a file: the JSON can pass the 128 KiB an argument may hold.
timeout 60 "$baton" plan "${GPT3[@]}" --json > "$tmp/gpt3.json" || fail "gpt3 json exit $?"
[ $(( $(date +%s) - start )) -le 10 ] || fail "gpt3 plan (every schedule) took more than 10 s"
python3 - "$tmp/gpt3.json" <<'PY' || fail "gpt3 json: $(head -c 2000 "$tmp/gpt3.json")"
import json, sys
out = json.load(open(sys.argv[1]))
plans = out["plans"]
assert plans, "no plans"
keys = {"t", "p", "d", "microbatch", "microbatches", "schedule", "virtual", "recompute",
        "memory_gb", "bubble_fraction", "step_s", "tflops_per_gpu"}
for p in plans:
    assert keys <= p.keys(), p
    assert p["t"] * p["p"] * p["d"] == 3072, p
    assert p["microbatch"] * p["microbatches"] * p["d"] == 1536, p
    assert p["memory_gb"] <= 80, p
    assert 0 <= p["bubble_fraction"] < 1, p
steps = [p["step_s"] for p in plans]
assert steps == sorted(steps), "not best first"
assert out["rejected"]["out_of_memory"] > 0, out["rejected"]
PY

# The table shows --top rows; the plot marks the chosen plan and the limit.
"$baton" plan "${GPT3[@]}" --top 3 --svg "$tmp/plan.svg" > "$tmp/table.txt" || fail "table exit $?"
[ "$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ ' "$tmp/table.txt")" -eq 3 ] || fail "top 3: $(cat "$tmp/table.txt")"
grep -q "wrote $tmp/plan.svg" "$tmp/table.txt" || fail "no wrote line"
grep -qF "on 3072 GPUs (8 per node, 80 GB, 312 TFLOPs), batch 1536" "$tmp/table.txt" \
  || fail "table title: $(head -1 "$tmp/table.txt")"
grep -q "<svg" "$tmp/plan.svg" || fail "no svg"
grep -q "chosen: t=" "$tmp/plan.svg" || fail "svg marks no chosen plan"
grep -q "limit 80 GB" "$tmp/plan.svg" || fail "svg draws no memory limit"

SMALL=(--layers 8 --hidden 4096 --heads 8 --seq 128 --vocab 1000
       --gpus-per-node 8 --peak-tflops 100 --batch 8)
expect_bad_input_of plan "no (t, p, d) with t*p*d = 7 GPUs is allowed" \
  --model gpt --layers 6 --hidden 4096 --heads 8 --seq 128 --vocab 1000 --gpus-per-node 8 \
  --peak-tflops 100 --batch 8 --gpus 7 --gpu-memory-gb 80
expect_bad_input_of plan "t=2 does not divide heads=7" --model gpt --layers 1 --hidden 70 \
  --heads 7 --seq 16 --vocab 10 --gpus 2 --gpus-per-node 8 --gpu-memory-gb 80 \
  --peak-tflops 100 --batch 1
expect_bad_input_of plan "GB per GPU; the smallest needs" "${SMALL[@]}" --gpus 8 --gpu-memory-gb 0.5
expect_bad_input_of plan "hidden=4096 must be a multiple of heads=3" \
  --model gpt --layers 8 --hidden 4096 --heads 3 --seq 128 --vocab 1000 --gpus 8 \
  --gpus-per-node 8 --gpu-memory-gb 80 --peak-tflops 100 --batch 8
expect_bad_input_of plan "--model bert is not known" --model bert "${SMALL[@]}" --gpus 8 \
  --gpu-memory-gb 80
expect_bad_input_of plan "--gpus" "${SMALL[@]}" --gpus 0 --gpu-memory-gb 80
expect_bad_input_of plan "--gpu-memory-gb" "${SMALL[@]}" --gpus 8 --gpu-memory-gb -1
expect_bad_input_of plan "--batch is required" --model gpt --layers 8 --hidden 4096 --heads 8 \
  --seq 128 --vocab 1000 --gpus 8 --gpus-per-node 8 --gpu-memory-gb 80 --peak-tflops 100
# Issue 21: constraints, each value checked.
expect_bad_input_of plan 'unknown schedule "foo"' "${SMALL[@]}" --gpus 8 --gpu-memory-gb 80 \
  --schedules 1f1b,foo
expect_bad_input_of plan '"2bw" is not searched by the planner' "${SMALL[@]}" --gpus 8 \
  --gpu-memory-gb 80 --schedules 2bw
expect_bad_input_of plan '"1f1b" is given twice' "${SMALL[@]}" --gpus 8 --gpu-memory-gb 80 \
  --schedules 1f1b,1f1b
expect_bad_input_of plan "has an empty item" "${SMALL[@]}" --gpus 8 --gpu-memory-gb 80 \
  --schedules 1f1b,
expect_bad_input_of plan "sometimes" "${SMALL[@]}" --gpus 8 --gpu-memory-gb 80 --recompute sometimes
expect_bad_input_of plan "--zero: 4" "${SMALL[@]}" --gpus 8 --gpu-memory-gb 80 --zero 4
# Regression (issue 30, item 16): the value as given, the range as (0, 1].
for bad in 1.5 0 -1 nan abc; do
  expect_bad_input_of plan "--max-memory-fraction: must be a number in (0, 1], got $bad" "${SMALL[@]}" \
    --gpus 8 --gpu-memory-gb 80 --max-memory-fraction "$bad"
done
expect_bad_input_of plan "80 GB per GPU x --max-memory-fraction 0.01; the smallest needs" "${SMALL[@]}" \
  --gpus 8 --gpu-memory-gb 80 --max-memory-fraction 0.01
expect_bad_input_of plan "--tp 3 does not divide --gpus 8" "${SMALL[@]}" --gpus 8 \
  --gpu-memory-gb 80 --tp 3
expect_bad_input_of plan "--tp x --pp x --dp = 16" "${SMALL[@]}" --gpus 8 --gpu-memory-gb 80 \
  --tp 2 --pp 4 --dp 2
expect_bad_input_of plan "schedule_needs_p_above_1 removed the last candidates" "${SMALL[@]}" \
  --gpus 8 --gpu-memory-gb 80 --pp 1 --schedules zb-v
expect_bad_input_of plan "zero_needs_d_above_1 removed the last candidates" "${SMALL[@]}" \
  --gpus 8 --gpu-memory-gb 80 --dp 1 --zero 1
expect_bad_input_of plan "out_of_memory removed the last candidates" "${SMALL[@]}" --gpus 8 \
  --gpu-memory-gb 80 --max-memory-fraction 0.01
# The output path is checked before the search: a search that would fail
# (nothing fits in 0.001 GB) reports the path.
expect_bad_input_of plan "--emit-config" "${SMALL[@]}" --gpus 8 --gpu-memory-gb 0.001 \
  --emit-config "$tmp/no/such/folder/plan.toml"
expect_bad_input_of plan "--emit-config" "${SMALL[@]}" --gpus 8 --gpu-memory-gb 80 \
  --emit-config "$tmp"

# Constrained: every plan keeps to the constraints, both FLOPs figures hold
# their formulas (96 B s l h^2 (1 + s/6h + V/16lh) with recomputation, 72 ...
# + 6 B s h V without), and tflops_per_gpu is the model figure.
out=$("$baton" plan "${SMALL[@]}" --gpus 8 --gpu-memory-gb 80 --schedules 1f1b,interleaved \
  --recompute always --zero 0 --pp 2 --json) || fail "constrained plan exit $?"
python3 - "$out" <<'PY' || fail "constrained json: $out"
import json, sys
plans = json.loads(sys.argv[1])["plans"]
assert plans
B, s, l, h, V, N, peak = 8, 128, 8, 4096, 1000, 8, 100
hardware = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
model = 72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V
for p in plans:
    assert p["schedule"] in ("1f1b", "interleaved") and p["recompute"] and p["zero"] == 0, p
    assert p["p"] == 2 and sum(p["stage_layers"]) == l, p
    hw = hardware / p["step_s"] / N / 1e12
    assert abs(p["hardware_tflops_per_gpu"] - hw) < 1e-6 * hw, (p, hw)
    assert abs(p["model_tflops_per_gpu"] - model / p["step_s"] / N / 1e12) < 1e-6 * hw, p
    assert p["tflops_per_gpu"] == p["model_tflops_per_gpu"], p
    assert abs(p["hfu"] - p["hardware_tflops_per_gpu"] / peak) < 1e-9, p
    assert abs(p["mfu"] - p["model_tflops_per_gpu"] / peak) < 1e-9, p
PY
echo "plan_cli: ok"
