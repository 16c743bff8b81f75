#!/usr/bin/env bash
# End-to-end checks of `baton plan`: the JSON, the table, the plot, and one
# line with exit 2 for each kind of bad input.
source "$(dirname "$0")/lib/common.sh"

# GPT-3 175B on 3072 A100s (the issue's case): seconds, not minutes.
GPT3=(--model gpt --layers 96 --hidden 12288 --heads 96 --seq 2048 --vocab 51200
      --gpus 3072 --gpus-per-node 8 --gpu-memory-gb 80 --peak-tflops 312 --batch 1536)
start=$(date +%s)
out=$(timeout 60 "$baton" plan "${GPT3[@]}" --json) || fail "gpt3 json exit $?"
[ $(( $(date +%s) - start )) -le 20 ] || fail "gpt3 plan took more than 20 s"
python3 - "$out" <<'PY' || fail "gpt3 json: $out"
import json, sys
out = json.loads(sys.argv[1])
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
echo "plan_cli: ok"
