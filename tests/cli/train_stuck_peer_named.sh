#!/usr/bin/env bash
# Issue 7.16: with a rank stopped (SIGSTOP) the launcher named whichever rank
# timed out first ("rank 0 exited with code 1" when rank 1 was stopped; rank 3
# when rank 2 was). It names the rank the others waited for, and each rank's
# error names the peer it waited for; over each point-to-point transport.
source "$(dirname "$0")/lib/common.sh"

# stop_rank <nproc> <rank to stop> <transport>: runs a job, stops one rank, waits.
stop_rank() {
  local nproc=$1 stuck=$2 transport=$3
  fresh "$tmp/out" "$tmp/err"
  "$baton" train --model mlp --layers 4 --hidden 32 --in-features 32 --batch 16 --microbatches 4 \
    --pp "$nproc" --nproc "$nproc" --steps 1000000 --timeout 3 --threads 1 --transport "$transport" \
    > "$tmp/out" 2> "$tmp/err" &
  local launcher=$!
  pids+=($launcher)
  for _ in $(seq 1 150); do grep -q "step 3/" "$tmp/out" && break; sleep 0.2; done
  grep -q "step 3/" "$tmp/out" || fail "training did not start: $(cat "$tmp/err")"
  local victim=""
  for p in $(pgrep -P $launcher); do
    tr '\0' '\n' < /proc/$p/environ | grep -qx "RANK=$stuck" && victim=$p
  done
  [ -n "$victim" ] || fail "no process for rank $stuck"
  # A shared-memory rank holds its inbox, a memfd; a Gloo one none.
  local inbox=0 want=0
  ls -l "/proc/$victim/fd" | grep -q "memfd:baton.inbox" && inbox=1
  [ "$transport" = shm ] && want=1
  [ $inbox -eq $want ] || fail "rank $stuck does not run over $transport (inbox: $inbox)"
  pids+=($victim)
  kill -STOP "$victim"
  local start=$(date +%s)
  wait $launcher; rc=$?
  [ $rc -ne 0 ] || fail "launcher exited 0 with rank $stuck stopped"
  [ $(( $(date +%s) - start )) -le 30 ] || fail "launcher took over 30 s"
  kill -0 "$victim" 2>/dev/null && fail "stopped rank $stuck was left behind"
  return 0
}

for transport in shm gloo; do
  stop_rank 2 1 "$transport"
  grep -q "\[launch\] rank 1 stopped responding (rank 0 timed out waiting for it)" "$tmp/err" \
    || fail "$transport, 2 ranks, rank 1 stopped: $(grep -v '^\[rank 1\]' "$tmp/err")"
  grep -q "^\[rank 0\] baton: error: \[comm\] rank 0 timed out after 3 s waiting for .*rank 1\|all-reduce over ranks 0-1" "$tmp/err" \
    || fail "$transport: rank 0 does not name what it waited for: $(cat "$tmp/err")"

  stop_rank 4 2 "$transport"
  grep -q "\[launch\] rank 2 stopped responding (ranks " "$tmp/err" \
    || fail "$transport, 4 ranks, rank 2 stopped: $(cat "$tmp/err")"
  grep -q "\[launch\] rank [013] exited" "$tmp/err" && fail "$transport: a waiting rank was blamed: $(cat "$tmp/err")"
done
echo "1 passed, 0 failed"
