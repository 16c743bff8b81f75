#!/usr/bin/env bash
# Issue 7.15: after a peer was SIGKILLed, an empty "[rank 0] baton: error:"
# line appeared in 2 of 3 runs: the message went out in pieces and the
# launcher's SIGTERM fell between them. Each error line is one write(2).
source "$(dirname "$0")/lib/common.sh"
args=(--model mlp --layers 4 --hidden 64 --in-features 64 --pp 2 --nproc 2 --microbatches 4 --batch 64
      --steps 1000000 --timeout 5 --threads 1)
for run in 1 2 3 4 5 6 7 8; do
  fresh "$tmp/out" "$tmp/err"
  "$baton" train "${args[@]}" > "$tmp/out" 2> "$tmp/err" &
  launcher=$!
  pids+=($launcher)
  for _ in $(seq 1 150); do grep -q "step 3/" "$tmp/out" && break; sleep 0.2; done
  grep -q "step 3/" "$tmp/out" || fail "run $run: training did not start: $(cat "$tmp/err")"
  victim=$(pgrep -P $launcher | sort -n | tail -1)
  kill -9 "$victim"
  wait $launcher
  if grep -qE "baton: error: *$" "$tmp/err"; then
    fail "run $run: an error line without its message: $(cat "$tmp/err")"
  fi
  grep -q "\[launch\] rank 1" "$tmp/err" || fail "run $run: rank 1 not named: $(cat "$tmp/err")"
done
echo "1 passed, 0 failed"
