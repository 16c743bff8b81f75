#!/usr/bin/env bash
# Issue 17: a CSV that `baton simulate --dp 2` exported in compute_comms form
# carries REDUCE_GRAD. simulate ran it, but the ranks of `baton train --dp 2`
# refused it ("already has REDUCE_GRAD actions"). Both now build the schedule
# in one place (schedule/runnable.h), keep a file's own reductions, and accept
# or refuse the same files: this one trains to the losses of --schedule 1f1b,
# and a copy with rank 1's REDUCE_GRAD removed is refused by both, alike.
source "$(dirname "$0")/lib/common.sh"

"$baton" simulate --schedule 1f1b --pp 2 --microbatches 4 --dp 2 --export-csv "$tmp/x.csv" \
  --csv-format compute_comms > /dev/null || fail "simulate --export-csv failed"
grep -q "REDUCE_GRAD" "$tmp/x.csv" || fail "the export has no REDUCE_GRAD: $(cat "$tmp/x.csv")"
for dp in 1 2; do
  "$baton" simulate --schedule-file "$tmp/x.csv" --dp "$dp" > "$tmp/sim$dp.out" 2>&1 \
    || fail "simulate --schedule-file --dp $dp: $(cat "$tmp/sim$dp.out")"
done

args=(--model mlp --layers 4 --hidden 16 --batch 8 --microbatches 4 --pp 2 --dp 2 --nproc 4
      --steps 2 --threads 1)
timeout 300 "$baton" train "${args[@]}" --schedule 1f1b --metrics "$tmp/gen.jsonl" \
  > "$tmp/gen.out" 2>&1 || fail "--schedule 1f1b: $(tail -5 "$tmp/gen.out")"
timeout 300 "$baton" train "${args[@]}" --schedule-file "$tmp/x.csv" --metrics "$tmp/file.jsonl" \
  > "$tmp/file.out" 2>&1 || fail "--schedule-file: $(tail -5 "$tmp/file.out")"
python3 - "$tmp/gen.jsonl" "$tmp/file.jsonl" <<'PY' || fail "losses differ"
import json, sys
def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if '"step"' in l]
ref, got = losses(sys.argv[1]), losses(sys.argv[2])
assert len(ref) == 2 and len(got) == len(ref), (got, ref)
for a, b in zip(got, ref):
    assert abs(a - b) <= 1e-6 * abs(b), (got, ref)
PY

# Stage 1's gradients never reduced on rank 1: both commands refuse the file.
sed 's/,1REDUCE_GRAD//' "$tmp/x.csv" > "$tmp/broken.csv"
cmp -s "$tmp/x.csv" "$tmp/broken.csv" && fail "sed removed nothing: $(cat "$tmp/x.csv")"
expected="rank 1 computes stage 1 but reduces none of its gradients"
expect_bad_input_of simulate "$expected" --schedule-file "$tmp/broken.csv" --dp 2
expect_bad_input "$expected" "${args[@]}" --schedule-file "$tmp/broken.csv"
echo "1 passed, 0 failed"
