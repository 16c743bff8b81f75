#!/usr/bin/env bash
# Issue 32's cap: --max-memory-gb refuses, before any rank starts, a layout
# whose predicted peak on some rank exceeds it (exit 2, one line naming the
# rank, the bytes and the largest part), and accepts one that fits, whose
# measured peak (the counting allocator's) then stays under it. The refused
# layout, run without the cap, measures above it: the cap refuses what the
# allocator would exceed. Bad values are one line and exit 2.
source "$(dirname "$0")/lib/common.sh"

for bad in 0 -1 nan abc inf; do
  expect_bad_input "--max-memory-gb: must be a finite number of GB above 0, got $bad" \
    "${T[@]}" --max-memory-gb "$bad"
done
printf 'model = "mlp"\nmax_memory_gb = 0\n' > "$tmp/zero.toml"
expect_bad_input 'key "max_memory_gb" must be a finite number of GB above 0' --config "$tmp/zero.toml"
expect_bad_input "--max-memory-gb caps the activation model's prediction" --model mlp \
  --hidden 16 --layers 4 --batch 8 --microbatches 2 --steps 2 --max-memory-gb 1 --tp 2 --pp 1 \
  --nproc 2

gpt=(--model gpt --layers 4 --hidden 128 --heads 4 --context 128 --batch 64 --microbatches 8
     --pp 2 --nproc 2 --threads 1 --steps 4 --log-every 100)
# GPipe holds all 8 micro-batches' stashes (about 190 MB a rank), 1F1B about 2
# (about 60 MB): a cap of 0.1 GB sits between them.
expect_bad_input "[train] --max-memory-gb 0.1: rank 1 is predicted to hold" "${gpt[@]}" \
  --schedule gpipe --max-memory-gb 0.1
out=$("$baton" train "${gpt[@]}" --schedule gpipe --max-memory-gb 0.1 2>&1)
printf '%s' "$out" | grep -q "above the cap of 100.00 MB (its largest part: activations" ||
  fail "the refusal does not name the largest part: $out"
# Refused by the launcher, before any rank started (no rank printed a line).
printf '%s' "$out" | grep -q "(checked before any rank started, without the data batch)" ||
  fail "not refused before the ranks started: $out"
printf '%s' "$out" | grep -q '\[rank ' && fail "a rank started before the refusal: $out"
"$baton" train "${gpt[@]}" --schedule gpipe --metrics "$tmp/gpipe.jsonl" > /dev/null 2>&1 ||
  fail "gpipe without the cap failed"
"$baton" train "${gpt[@]}" --schedule 1f1b --max-memory-gb 0.1 --metrics "$tmp/1f1b.jsonl" \
  > "$tmp/1f1b.out" 2>&1 || fail "1f1b under the cap was refused: $(tail -2 "$tmp/1f1b.out")"
# The launcher's check covers layer counts and every recomputation mode too:
# GPipe cut 2,4 and GPipe with selective recomputation are refused before any
# rank starts; GPipe recomputing every micro-batch keeps its stage inputs only,
# is accepted, and measures under the cap.
for extra in "--balance 2,4" "--recompute selective"; do
  # shellcheck disable=SC2086
  out=$("$baton" train "${gpt[@]}" --schedule gpipe $extra --max-memory-gb 0.1 2>&1) &&
    fail "gpipe $extra passed the cap"
  printf '%s' "$out" | grep -q "(checked before any rank started, without the data batch)" ||
    fail "gpipe $extra not refused before the ranks started: $out"
done
"$baton" train "${gpt[@]}" --schedule gpipe --recompute always --max-memory-gb 0.1 \
  --metrics "$tmp/always.jsonl" > "$tmp/always.out" 2>&1 ||
  fail "gpipe recomputing every micro-batch was refused: $(tail -2 "$tmp/always.out")"
python3 - "$tmp/gpipe.jsonl" "$tmp/1f1b.jsonl" "$tmp/always.jsonl" <<'PY' || fail "the cap does not match the allocator"
import json, sys
def final(path):
    return [json.loads(l) for l in open(path) if '"final"' in l][-1]["memory"]
cap = 0.1e9
assert max(m["measured_peak_bytes"] for m in final(sys.argv[1])) > cap, "gpipe fits after all"
for path in sys.argv[2:]:
    for m in final(path):
        assert 0 < m["measured_peak_bytes"] <= cap, (path, m)
PY
# dp 2 under ZeRO-1 (a replica's micro-batch as above, 8 samples) is checked
# by the launcher too: GPipe refused before any rank starts, 1F1B accepted
# and measured under the cap on all four ranks.
dp2=(--model gpt --layers 4 --hidden 128 --heads 4 --context 128 --batch 128 --microbatches 8
     --pp 2 --dp 2 --zero 1 --nproc 4 --threads 1 --steps 4 --log-every 100)
out=$("$baton" train "${dp2[@]}" --schedule gpipe --max-memory-gb 0.1 2>&1) &&
  fail "dp 2 gpipe passed the cap"
printf '%s' "$out" | grep -q "(checked before any rank started, without the data batch)" ||
  fail "dp 2 gpipe not refused before the ranks started: $out"
# Named by the global rank of pipeline rank 1's first replica (rank 2).
printf '%s' "$out" | grep -q "rank 2 is predicted to hold" || fail "not named as rank 2: $out"
"$baton" train "${dp2[@]}" --schedule 1f1b --max-memory-gb 0.1 --metrics "$tmp/dp2.jsonl" \
  > "$tmp/dp2.out" 2>&1 || fail "dp 2 1f1b under the cap was refused: $(tail -2 "$tmp/dp2.out")"
python3 - "$tmp/dp2.jsonl" <<'PY' || fail "dp 2 does not measure under the cap"
import json, sys
final = [json.loads(l) for l in open(sys.argv[1]) if '"final"' in l][-1]["memory"]
assert len(final) == 4 and all(0 < m["measured_peak_bytes"] <= 0.1e9 for m in final), final
PY
# A cap below a rank's parameters alone says so.
expect_bad_input "'s parameters alone take" "${gpt[@]}" --max-memory-gb 0.001
echo ok
