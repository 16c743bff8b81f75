#!/usr/bin/env bash
# `baton train --profile-out` writes a profile that `baton plan --profile`
# accepts, trains nothing, and refuses a bad path with one line before
# profiling. A bf16 profile is measured in bf16, and planned only as one.
source "$(dirname "$0")/lib/common.sh"
P=(--model mlp --layers 4 --hidden 16 --batch 8 --microbatches 2 --pp 1 --threads 1)

expect_bad_input "--profile-out \"$tmp/no/p.json\": folder \"$tmp/no\" does not exist" \
  "${P[@]}" --profile-out "$tmp/no/p.json"
expect_bad_input "--profile-out \"$tmp\" is a folder" "${P[@]}" --profile-out "$tmp"
expect_bad_input "--metrics and --profile-out name the same file" \
  "${P[@]}" --metrics "$tmp/x" --profile-out "$tmp/x"

out=$(timeout 120 "$baton" train "${P[@]}" --profile-out "$tmp/p.json" 2>&1) || fail "profile exit $?: $out"
printf '%s' "$out" | grep -q "step" && fail "--profile-out trained: $out"
python3 - "$tmp/p.json" <<'PY' || fail "profile: $(cat "$tmp/p.json")"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["baton_profile"] == 2 and p["microbatch"] == 4 and p["backward_split"] == "halved", p
assert p["model"]["model"] == "mlp" and p["model"]["layers"] == 4 and p["model"]["hidden"] == 16, p
assert len(p["layers"]) == 4, p
# Each layer: the median of 5 timings, the fastest of 4 rounds (a round can fall in a slow spell).
assert p["repeats"] == 5 and p["rounds"] == 4, p
for l in p["layers"]:
    assert l["forward_s"] > 0 and l["input_backward_s"] == l["weight_backward_s"] > 0, l
    assert l["parameter_bytes"] > 0 and l["activation_bytes"] > 0 and l["output_bytes"] > 0, l
    # The fixed parts (fitted from a second profile at b = 2) lie within the times.
    assert 0 <= l["forward_fixed_s"] <= l["forward_s"], l
    assert 0 <= l["backward_fixed_s"] <= l["input_backward_s"] + l["weight_backward_s"], l
    # Timed again at the whole mini-batch of 8 (issue 21: large micro-batches run faster per
    # sample than the line from b / 2 and b says).
    assert [x["microbatch"] for x in l["larger"]] == [8], l
    assert l["larger"][0]["forward_s"] > 0 and l["larger"][0]["backward_s"] > 0, l
# Adam (the default) on the model's 4 layers' parameters: a positive time per byte, under
# a microsecond (it is a few floating-point operations per 4 bytes).
assert p["optimizer"] == "adam" and 0 < p["optimizer_s_per_parameter_byte"] < 1e-6, p
assert p["layers"][1]["parameter_bytes"] == (16 * 16 + 16) * 4, p["layers"][1]
assert p["layers"][1]["output_bytes"] == 4 * 16 * 4, p["layers"][1]
# Whole steps on one process (issue 21): the step at m = 2 and the overheads fitted from it and
# m = 1, which (unless a part was clamped at 0) add back up to that step.
m, step = 2, p["one_process_step_s"]
assert step > 0 and p["action_overhead_s"] >= 0 and p["step_overhead_s"] >= 0, p
layers = sum(l["forward_s"] + l["input_backward_s"] + l["weight_backward_s"] for l in p["layers"])
optimizer = p["optimizer_s_per_parameter_byte"] * sum(l["parameter_bytes"] for l in p["layers"])
if p["action_overhead_s"] > 0 and p["step_overhead_s"] > 0:
    fitted = m * (layers + 2 * p["action_overhead_s"]) + optimizer + p["step_overhead_s"]
    assert abs(fitted - step) <= 1e-9 + 1e-6 * step, (fitted, step, p)
PY
plan=$("$baton" plan --profile "$tmp/p.json" --gpus 2 --gpus-per-node 2 --gpu-memory-gb 1 \
  --batch 8 --json) || fail "plan --profile exit $?"
python3 -c 'import json,sys; assert json.loads(sys.argv[1])["plans"]' "$plan" || fail "no plans: $plan"

# Regression (issue 30, item 9): the profile is measured in the run's
# precision and records it; the planner refuses a profile of another one.
timeout 120 "$baton" train "${P[@]}" --precision bf16 --profile-out "$tmp/bf16.json" > /dev/null 2>&1 \
  || fail "bf16 profile exit $?"
python3 - "$tmp/p.json" "$tmp/bf16.json" <<'PY' || fail "the bf16 profile: $(cat "$tmp/bf16.json")"
import json, sys
fp32, bf16 = (json.load(open(f)) for f in sys.argv[1:])
assert fp32["precision"] == "fp32" and bf16["precision"] == "bf16", (fp32["precision"], bf16["precision"])
# Under autocast a Linear's output is bf16: half the bytes of fp32's, its
# parameters (the fp32 masters) the same.
for a, b in zip(fp32["layers"], bf16["layers"]):
    assert b["output_bytes"] * 2 == a["output_bytes"], (a, b)
    assert b["parameter_bytes"] == a["parameter_bytes"], (a, b)
PY
PLAN=(--gpus 2 --gpus-per-node 2 --gpu-memory-gb 1 --batch 8 --json)
expect_bad_input_of plan "--profile $tmp/bf16.json was measured in bf16 but the run is fp32 (--precision's default)" \
  --profile "$tmp/bf16.json" "${PLAN[@]}"
expect_bad_input_of plan "--profile $tmp/p.json was measured in fp32 but the run is bf16" \
  --profile "$tmp/p.json" "${PLAN[@]}" --precision bf16
"$baton" plan --profile "$tmp/bf16.json" "${PLAN[@]}" --precision bf16 > /dev/null \
  || fail "plan of a bf16 profile with --precision bf16 exit $?"
expect_bad_input_of plan "--precision bf16 says what a --profile was measured in" \
  --model gpt --layers 4 --hidden 64 --heads 4 --seq 64 --vocab 100 --peak-tflops 10 "${PLAN[@]}" \
  --precision bf16
# The TOML key mirrors the flag.
printf 'model = "mlp"\nlayers = 4\nhidden = 16\nbatch = 8\nmicrobatches = 2\npp = 1\nprofile_out = "%s"\n' \
  "$tmp/q.json" > "$tmp/c.toml"
"$baton" train --config "$tmp/c.toml" --threads 1 > /dev/null || fail "profile_out key exit $?"
[ -s "$tmp/q.json" ] || fail "profile_out key wrote nothing"
echo "1 passed, 0 failed"
