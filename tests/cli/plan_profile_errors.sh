#!/usr/bin/env bash
# `baton plan --profile`: a missing or malformed profile, and model flags
# that contradict it, are one line naming the file with exit 2; a valid
# hand-written profile plans with t = 1 and p at most its layers; a measured
# all-reduce rate (--allreduce-gbps) prices the d = 2 plans.
source "$(dirname "$0")/lib/common.sh"

layer='{"forward_s": 0.001, "input_backward_s": 0.001, "weight_backward_s": 0.001,
        "activation_bytes": 1000, "parameter_bytes": 4000, "output_bytes": 1000}'
cat > "$tmp/good.json" <<JSON
{"baton_profile": 2, "model": {"model": "mlp", "layers": 3, "hidden": 16}, "microbatch": 2,
 "layers": [$layer, $layer, $layer]}
JSON
C=(--gpus 4 --gpus-per-node 4 --gpu-memory-gb 8 --batch 8)

out=$("$baton" plan --profile "$tmp/good.json" "${C[@]}" --json) || fail "good profile exit $?"
python3 - "$out" <<'PY' || fail "good profile json: $out"
import json, sys
out = json.loads(sys.argv[1])
assert out["plans"], out
for p in out["plans"]:
    assert p["t"] == 1 and p["p"] * p["virtual"] <= 3 and not p["recompute"], p
assert out["rejected"]["profile_needs_t_1"] > 0, out["rejected"]
assert out["rejected"]["p_exceeds_profiled_layers"] == 1, out["rejected"]  # p = 4
PY
# Repeating the file's own values is no conflict.
"$baton" plan --profile "$tmp/good.json" "${C[@]}" --model mlp --layers 3 > /dev/null \
  || fail "flags equal to the profile's were refused"

expect_bad_input_of plan "--profile $tmp/none.json does not exist" --profile "$tmp/none.json" \
  "${C[@]}"
# Issue 16.9: a folder was "not JSON", and /dev/zero was read without end.
expect_bad_input_of plan "--profile $tmp is a folder; name a file written by baton train" \
  --profile "$tmp" "${C[@]}"
expect_bad_input_of plan "--profile /dev/zero is a character device, not a regular file" \
  --profile /dev/zero "${C[@]}"
echo '{"baton_profile": 2, "model": ' > "$tmp/cut.json"
expect_bad_input_of plan "--profile $tmp/cut.json is not JSON" --profile "$tmp/cut.json" "${C[@]}"
# A version 1 profile (activation_bytes: each layer's input) is refused with how to re-profile.
sed 's/"baton_profile": 2/"baton_profile": 1/' "$tmp/good.json" > "$tmp/v1.json"
expect_bad_input_of plan "--profile $tmp/v1.json is a baton profile of version 1, whose activation_bytes are not what each layer keeps; write it again with baton train --profile-out (version 2)" \
  --profile "$tmp/v1.json" "${C[@]}"
echo '{"layers": []}' > "$tmp/other.json"
expect_bad_input_of plan "--profile $tmp/other.json is not a baton profile" --profile "$tmp/other.json" "${C[@]}"
sed 's/"forward_s": 0.001/"forward_s": -1/' "$tmp/good.json" > "$tmp/negative.json"
expect_bad_input_of plan "layer 0 \"forward_s\" is -1" --profile "$tmp/negative.json" "${C[@]}"
sed 's/"output_bytes": 1000//; s/"parameter_bytes": 4000,/"parameter_bytes": 4000/' "$tmp/good.json" > "$tmp/missing.json"
expect_bad_input_of plan "layer 0 has no number \"output_bytes\"" --profile "$tmp/missing.json" "${C[@]}"
sed 's/"layers": \[.*/"layers": []}/' "$tmp/good.json" | head -2 > "$tmp/empty.json"
expect_bad_input_of plan "has no \"layers\" array" --profile "$tmp/empty.json" "${C[@]}"

# The dp all-reduce's measured rate (issue 21): d = 2 plans take longer at a slower collective.
C2=(--gpus 2 --gpus-per-node 2 --gpu-memory-gb 8 --batch 8 --dp 2 --pp 1 --microbatch 2 --json)
slow=$("$baton" plan --profile "$tmp/good.json" "${C2[@]}" --allreduce-gbps 0.001 \
  --allreduce-latency-us 100) || fail "--allreduce-gbps exit $?"
fast=$("$baton" plan --profile "$tmp/good.json" "${C2[@]}") || fail "d 2 exit $?"
python3 - "$slow" "$fast" <<'PY' || fail "--allreduce-gbps did not slow the d = 2 plan: $slow"
import json, sys
slow, fast = (json.loads(a)["plans"][0] for a in sys.argv[1:])
# 3 layers x 4000 bytes over 2 ranks at 1 Mbit/s: 2 (d - 1) / d x 12000 x 8 / 1e6 = 0.096 s,
# less the last backward it hides behind (6 ms).
assert 0.08 < slow["step_s"] - fast["step_s"] < 0.1, (slow, fast)
PY
expect_bad_input_of plan "--allreduce-latency-us requires --allreduce-gbps" \
  --profile "$tmp/good.json" "${C[@]}" --allreduce-latency-us 5
expect_bad_input_of plan "--allreduce-gbps" --profile "$tmp/good.json" "${C[@]}" --allreduce-gbps -1

expect_bad_input_of plan "--layers 4 conflicts with --profile $tmp/good.json, which has layers 3" \
  --profile "$tmp/good.json" "${C[@]}" --layers 4
expect_bad_input_of plan "--model gpt conflicts with --profile $tmp/good.json, which has model mlp" \
  --profile "$tmp/good.json" "${C[@]}" --model gpt
expect_bad_input_of plan "--vocab 100 conflicts with --profile $tmp/good.json, which has no vocab" \
  --profile "$tmp/good.json" "${C[@]}" --vocab 100
expect_bad_input_of plan "--peak-tflops has no use with --profile" \
  --profile "$tmp/good.json" "${C[@]}" --peak-tflops 100
expect_bad_input_of plan "--layers is required (or give --profile FILE)" \
  --hidden 16 --heads 2 --seq 8 --vocab 10 --peak-tflops 1 "${C[@]}"
expect_bad_input_of plan "--microbatch 3 divides batch / d for no allowed d" \
  --profile "$tmp/good.json" "${C[@]}" --microbatch 3
# The plot never overwrites the profile it was planned from (issue 16.2).
cp "$tmp/good.json" "$tmp/keep.json"
expect_bad_input_of plan "--profile and --svg name the same file" --profile "$tmp/good.json" "${C[@]}" --svg "$tmp/good.json"
cmp -s "$tmp/good.json" "$tmp/keep.json" || fail "--svg overwrote the profile"
echo "1 passed, 0 failed"
