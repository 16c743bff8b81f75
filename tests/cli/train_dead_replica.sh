#!/usr/bin/env bash
# A data-parallel replica killed in the middle of training (dp=2, pp=1: the
# ranks meet only in the dp group's gradient all-reduces and the loss sum):
# the survivor exits non-zero within the (short) timeout with a [comm] error
# naming its rank and the dp group or the loss sum it waited on.
source "$(dirname "$0")/lib/common.sh"

args="--model mlp --layers 4 --hidden 64 --in-features 64 --dp 2 --pp 1 --microbatches 2 --batch 64 --steps 1000000 --timeout 5 --threads 1"
port=$(( 20000 + RANDOM % 20000 ))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$baton" train $args > "$tmp/out$r" 2> "$tmp/err$r" &
  pids+=($!)
done
for _ in $(seq 1 100); do grep -q "^step 3/" "$tmp/out0" && break; sleep 0.2; done
grep -q "^step 3/" "$tmp/out0" || fail "training did not start: $(cat "$tmp/err0" "$tmp/err1")"
kill -9 "${pids[1]}"
start=$(date +%s)
wait "${pids[0]}"; rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -ne 0 ] || fail "rank 0 exited 0 after its replica died"
[ $elapsed -le 30 ] || fail "rank 0 took ${elapsed}s to notice (timeout 5s)"
[ "$(wc -l < "$tmp/err0")" -eq 1 ] || fail "rank 0 printed more than one line: $(cat "$tmp/err0")"
grep -q "\[comm\] rank 0" "$tmp/err0" || fail "rank 0's error does not name it: $(cat "$tmp/err0")"
grep -qE "REDUCE_GRAD \(over the dp group of ranks 0, 1\)|loss sum" "$tmp/err0" \
  || fail "rank 0's error does not name the dp group or the loss sum: $(cat "$tmp/err0")"
echo "1 passed, 0 failed"
