#!/usr/bin/env bash
# `baton train --dp`: two replicas of a 2-stage pipeline report the losses of
# one pipeline on the same global batch; grids that do not fit --nproc or the
# batch get one line and exit 2.
source "$(dirname "$0")/lib/common.sh"

run() {  # run <name> [steps] args...: trains, metrics into $tmp/<name>.jsonl
  local name=$1 steps=2; shift
  case ${1:-} in [0-9]*) steps=$1; shift ;; esac
  timeout 300 "$baton" train --model mlp --layers 4 --hidden 16 --batch 16 --microbatches 2 --steps "$steps" \
    --threads 1 --metrics "$tmp/$name.jsonl" "$@" > "$tmp/$name.out" 2>&1 \
    || fail "$name: $(tail -5 "$tmp/$name.out")"
}
run dp2 --dp 2 --pp 2 --nproc 4
run dp1 --dp 1 --pp 2 --nproc 2
run dp2_small_buckets --dp 2 --pp 2 --nproc 4 --bucket-mb 0.001
grep -q "dp=2, pp=2" "$tmp/dp2.out" || fail "no dp in the banner: $(head -1 "$tmp/dp2.out")"
python3 - "$tmp/dp1.jsonl" "$tmp/dp2.jsonl" "$tmp/dp2_small_buckets.jsonl" <<'PY' || fail "losses differ"
import json, sys
def losses(path):
    return [json.loads(l)["loss"] for l in open(path) if '"step"' in l]
ref = losses(sys.argv[1])
assert len(ref) == 2, ref
for path in sys.argv[2:]:
    got = losses(path)
    assert len(got) == len(ref), (path, got)
    for a, b in zip(got, ref):
        assert abs(a - b) <= 1e-5 * abs(b), (path, got, ref)
PY

# A checkpoint saved by dp=2 (replica 0 writes) resumes under dp=1: step 3 as a straight run's.
run saved --dp 2 --pp 2 --nproc 4 --save "$tmp/ckpt" --optimizer sgd
run resumed 3 --dp 1 --pp 2 --nproc 2 --resume "$tmp/ckpt" --optimizer sgd
run straight 3 --dp 1 --pp 2 --nproc 2 --optimizer sgd
python3 - "$tmp/straight.jsonl" "$tmp/resumed.jsonl" <<'PY' || fail "resumed loss differs"
import json, sys
def losses(path):
    return {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(path) if '"step"' in l}
ref, got = losses(sys.argv[1]), losses(sys.argv[2])
assert list(got) == [3], got
assert abs(got[3] - ref[3]) <= 1e-5 * abs(ref[3]), (got, ref)
PY

small="--model mlp --layers 4 --hidden 8 --in-features 8 --steps 1 --microbatches 2"
expect_bad_input "dp=2 x pp=2 needs 4 ranks but --nproc is 2" $small --batch 8 --dp 2 --pp 2 --nproc 2
expect_bad_input "batch of 9 samples does not split evenly over dp=2 replicas" $small --batch 9 --dp 2 --pp 1 --nproc 2
expect_bad_input "dp=4 leaves each replica 1 of the batch's 4 samples, fewer than its 2 micro-batches" \
  $small --batch 4 --dp 4 --pp 1 --nproc 4
expect_bad_input "dp must be at least 1, got 0" $small --batch 8 --dp 0
expect_bad_input "bucket-mb must be above 0 and at most 1048576 MiB, got 0" $small --batch 8 --bucket-mb 0
expect_bad_input "bucket-mb must be above 0 and at most 1048576 MiB, got 1e+308" $small --batch 8 --bucket-mb 1e308
printf 'bucket_mb = 1e308\n' > "$tmp/bucket.toml"
expect_bad_input "bucket-mb must be above 0 and at most 1048576 MiB" $small --batch 8 --config "$tmp/bucket.toml"
echo "1 passed, 0 failed"
