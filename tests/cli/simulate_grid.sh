#!/usr/bin/env bash
# Issue 9: `baton simulate --dp --tp`. With dp > 1 every stage's gradient
# buckets are all-reduced after its last backward (REDUCE_GRAD), and every
# writer shows them; bad grid sizes are refused with one line.
source "$(dirname "$0")/lib/common.sh"
check() { expect_bad_input_of simulate "$@"; }  # check "<expected text>" args...

check "the grid dp=0 x pp=4 x tp=1 needs every size >= 1" --dp 0
check "the grid dp=1 x pp=4 x tp=0 needs every size >= 1" --tp 0
check "the grid dp=-3 x pp=4 x tp=1" --dp -3
check "at most 1048576 ranks in all" --dp 4096 --tp 4096
check "--dp = 100000000000" --dp 100000000000
check "--bucket-mb: must be a finite number > 0, got 0" --dp 2 --bucket-mb 0
check "--dp-gbps: must be a finite number >= 0" --dp 2 --dp-gbps -1
check "--tp-latency-us: must be a finite number >= 0" --tp 2 --tp-latency-us inf
check "buckets; use larger buckets" --dp 2 --param-mb 1e12 --bucket-mb 1e-3
check "--dp given more than once" --dp 2 --dp 3
printf '0F0 0B0\n' > "$tmp/s.txt"
check "the grid dp=0 x pp=1 x tp=1" --schedule-file "$tmp/s.txt" --dp 0

# p = 2, m = 2, dp = 2, 1F1B, F = 1, B = 2; one 64 MiB bucket per stage at
# 64 MiB / 1 ms (the cost unit counts as ms) and 500 us latency: the ring takes
# 2 (d - 1) / d * 64 MiB / bandwidth + 2 (d - 1) * latency = 1 + 1 = 2, all of
# it exposed after rank 0's last B at 9.
gbps=$(python3 -c 'print(64 * 1024 * 1024 / 1e6)')
out=$("$baton" simulate --pp 2 --microbatches 2 --dp 2 --param-mb 64 --bucket-mb 64 \
  --dp-latency-us 500 --dp-gbps "$gbps" --json) || fail "simulate --dp 2 exit $?"
python3 - "$out" <<'PY' || fail "json: $out"
import json, sys
m = json.loads(sys.argv[1])
assert abs(m["makespan"] - 11) < 1e-9, m
assert m["dp"] == 2 and m["tp"] == 1 and m["world_size"] == 4, m
assert m["buckets_per_stage"] == 1, m
assert all(abs(x - 2) < 1e-9 for x in m["reduce_grad"]), m
assert abs(m["exposed_reduction"][0] - 2) < 1e-9, m
PY

# Buckets: 60 MiB per rank in 25 MiB buckets is three (25, 25, 10), in order.
"$baton" simulate --pp 2 --microbatches 2 --dp 2 --param-mb 60 --print-schedule \
  | grep -q "0B1 0REDUCE_GRAD0 0REDUCE_GRAD1 0REDUCE_GRAD2$" || fail "buckets not after the last B"
# dp = 1 adds nothing.
"$baton" simulate --pp 2 --print-schedule | grep -q REDUCE_GRAD && fail "dp = 1 added REDUCE_GRAD"

# Every writer shows the reductions.
"$baton" simulate --pp 2 --microbatches 2 --dp 2 --param-mb 60 --grid --svg "$tmp/g.svg" \
  --trace "$tmp/g.json" --export-csv "$tmp/g.csv" > "$tmp/out.txt" || fail "writers exit $?"
grep -q "^    dp | .*R0 R1 R2" "$tmp/out.txt" || fail "grid has no dp row: $(cat "$tmp/out.txt")"
grep -q "reduce-grad" "$tmp/out.txt" || fail "no reduction table"
grep -q "1REDUCE_GRAD2" "$tmp/g.svg" || fail "SVG has no REDUCE_GRAD"
grep -q '"rank 1 dp"' "$tmp/g.json" || fail "trace has no dp track"
grep -q '"cat":"REDUCE_GRAD"' "$tmp/g.json" || fail "trace has no REDUCE_GRAD event"
grep -q "^0F0,0F1,0B0,0B1,0REDUCE_GRAD0,0REDUCE_GRAD1,0REDUCE_GRAD2$" "$tmp/g.csv" \
  || fail "CSV: $(cat "$tmp/g.csv")"
# The CSV and the text form read back with their reductions.
"$baton" simulate --schedule-file "$tmp/g.csv" --dp 2 --param-mb 60 --json | grep -q '"makespan"' \
  || fail "CSV with REDUCE_GRAD does not load"
"$baton" simulate --pp 2 --microbatches 2 --dp 2 --print-schedule | sed -n '/^# baton/,$p' > "$tmp/r.txt"
"$baton" simulate --schedule-file "$tmp/r.txt" --dp 2 --json > /dev/null || fail "text form does not load"
# PyTorch's one-bucket form; a file naming a bucket the costs lack is refused.
printf '0F0,0B0,0REDUCE_GRAD\n' > "$tmp/p.csv"
"$baton" simulate --schedule-file "$tmp/p.csv" --dp 2 --json | grep -q '"reduce_grad":\[0.02' \
  || fail "PyTorch's REDUCE_GRAD not charged"
printf '0F0,0B0,0REDUCE_GRAD0,0REDUCE_GRAD1\n' > "$tmp/q.csv"
check "0REDUCE_GRAD1 reduces bucket 1 but the cost model gives stage 0 1 bucket" \
  --schedule-file "$tmp/q.csv" --dp 2

# tp: each F and B pays 2 * --tp-layers ring all-reduces of --tp-mb plus --tp-comm.
out=$("$baton" simulate --pp 1 --microbatches 1 --tp 2 --tp-comm 0.5 --tp-latency-us 0 --tp-gbps 0 --json)
python3 -c "import json,sys; m=json.loads(sys.argv[1]); assert abs(m['makespan'] - 4) < 1e-9, m" "$out" \
  || fail "tp: $out"
out=$("$baton" simulate --pp 1 --microbatches 1 --tp 4 --tp-latency-us 1000 --tp-gbps 0 --tp-layers 2 --json)
# 2 layers * 2 all-reduces * 2 (4 - 1) steps * 1 ms = 24 per action, F and B.
python3 -c "import json,sys; m=json.loads(sys.argv[1]); assert abs(m['makespan'] - 51) < 1e-9, m" "$out" \
  || fail "tp ring: $out"
echo "1 passed, 0 failed"
