#!/usr/bin/env bash
# A rank killed in the middle of training: the surviving rank exits non-zero
# within the (short) timeout with a [comm] error naming its rank, the stage
# and the action it waited on (with 1f1b, and with 2bw, which carries
# backwards between steps). Then the same through the local launcher: it
# stops the other rank and exits non-zero naming the failed one. All of it
# over each point-to-point transport (shm, gloo), each run checked to use it
# (a shared-memory rank holds its inbox, a memfd) and to leave nothing of its
# ranks in /dev/shm.
source "$(dirname "$0")/lib/common.sh"

args="--model mlp --layers 4 --hidden 64 --in-features 64 --pp 2 --microbatches 4 --batch 64 --steps 1000000 --timeout 5 --threads 1"

# check_transport <transport> <what> <pid>: the rank holds an inbox iff its transport is shm.
check_transport() {
  local transport=$1 what=$2 pid=$3 inbox=0 want=0
  ls -l "/proc/$pid/fd" 2>/dev/null | grep -q "memfd:baton.inbox" && inbox=1
  [ "$transport" = shm ] && want=1
  [ $inbox -eq $want ] || fail "$what: rank process $pid does not run over $transport (inbox: $inbox)"
}

# check_no_shm <what> <pid>...: no name in /dev/shm carries one of these processes' ids.
check_no_shm() {
  local what=$1 pid left
  shift
  for pid in "$@"; do
    left=$(ls /dev/shm | grep -E "(^|\.)$pid(\.|$)")
    [ -z "$left" ] || fail "$what: process $pid left shared memory behind: $left"
  done
}

# dead_peer <schedule> <transport>: two ranks under torchrun's variables; rank 1 dies.
dead_peer() {
  local schedule=$1 transport=$2 port=$(( 20000 + RANDOM % 20000 )) r rc start elapsed
  local before=${#pids[@]} what="$1 over $2"
  fresh "$tmp/out0" "$tmp/out1" "$tmp/err0" "$tmp/err1"
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$baton" train $args --schedule "$schedule" --transport "$transport" > "$tmp/out$r" 2> "$tmp/err$r" &
    pids+=($!)
  done
  # Wait until training is under way, then kill rank 1 without warning.
  for _ in $(seq 1 100); do grep -q "^step 3/" "$tmp/out0" && break; sleep 0.2; done
  grep -q "^step 3/" "$tmp/out0" || fail "$what: training did not start: $(cat "$tmp/err0" "$tmp/err1")"
  check_transport "$transport" "$what" "${pids[$before]}"
  kill -9 "${pids[$((before + 1))]}"
  start=$(date +%s)
  wait "${pids[$before]}"; rc=$?
  elapsed=$(( $(date +%s) - start ))
  [ $rc -ne 0 ] || fail "$what: rank 0 exited 0 after its peer died"
  [ $elapsed -le 30 ] || fail "$what: rank 0 took ${elapsed}s to notice (timeout 5s)"
  grep -q "\[comm\] rank 0" "$tmp/err0" || fail "$what: rank 0's error does not name it: $(cat "$tmp/err0")"
  grep -qE "stage [0-9]+ micro-batch [0-9]+ (RECV|SEND)|all_reduce|loss sum" "$tmp/err0" \
    || fail "$what: rank 0's error does not name the action: $(cat "$tmp/err0")"
  check_no_shm "$what" "${pids[$before]}" "${pids[$((before + 1))]}"
}

# dead_rank_under_launcher <transport>: kill one rank; the launcher stops the
# other and names the failed one.
dead_rank_under_launcher() {
  local transport=$1 what="launcher over $1" launcher children victim rc start elapsed c
  fresh "$tmp/launch_out" "$tmp/launch_err"
  "$baton" train $args --nproc 2 --transport "$transport" > "$tmp/launch_out" 2> "$tmp/launch_err" &
  launcher=$!
  pids+=($launcher)
  for _ in $(seq 1 100); do grep -q "step 3/" "$tmp/launch_out" && break; sleep 0.2; done
  children=$(pgrep -P $launcher | sort -n)
  [ "$(echo "$children" | wc -l)" -eq 2 ] || fail "$what: launcher has children: $children"
  for c in $children; do check_transport "$transport" "$what" "$c"; done
  victim=$(echo "$children" | tail -1)
  kill -9 "$victim"
  start=$(date +%s)
  wait $launcher; rc=$?
  elapsed=$(( $(date +%s) - start ))
  [ $rc -ne 0 ] || fail "$what: launcher exited 0 after a rank died"
  [ $elapsed -le 30 ] || fail "$what: launcher took ${elapsed}s"
  grep -qiE "rank [01].*(signal|killed|exit)" "$tmp/launch_err" "$tmp/launch_out" \
    || fail "$what: launcher did not name the failed rank: $(cat "$tmp/launch_err")"
  for c in $children; do kill -0 "$c" 2>/dev/null && fail "$what: rank process $c still running"; done
  check_no_shm "$what" $children
}

for transport in shm gloo; do
  dead_peer 1f1b "$transport"
  # 2bw carries backwards (and their receives) from step to step: the same.
  dead_peer 2bw "$transport"
  dead_rank_under_launcher "$transport"
done
echo "1 passed, 0 failed"
