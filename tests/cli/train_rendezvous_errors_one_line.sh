#!/usr/bin/env bash
# Issue 16.8: a rank that cannot reach the rendezvous printed c10d's own log
# lines ("WARNING: Logging before InitGoogleLogging", socket.cpp warnings)
# before baton's, 3 to 8 lines, and an unresolvable MASTER_ADDR was retried
# for the whole --timeout. Each case is one line naming the address and port,
# and a name that does not resolve fails at once.
source "$(dirname "$0")/lib/common.sh"
command -v python3 > /dev/null || { echo "skipped: no python3 for the foreign listener"; exit 77; }

# expect_rank_error <rank> <seconds at most> "<expected text>" <MASTER_ADDR> <MASTER_PORT> [args]:
# that rank of 2 fails alone with exit 1 and one line holding the text, quickly.
expect_rank_error() {
  local rank=$1 most=$2 expected=$3 addr=$4 port=$5 err rc start elapsed
  shift 5
  start=$(date +%s%N)
  err=$(RANK=$rank WORLD_SIZE=2 MASTER_ADDR=$addr MASTER_PORT=$port timeout 120 "$baton" train \
    --model mlp --pp 2 --threads 1 "$@" 2>&1 > /dev/null); rc=$?
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  local what="rank $rank at $addr:$port"
  [ $rc -eq 1 ] || fail "$what: exit $rc (expected 1): $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$what: printed more than one line: $err"
  printf '%s' "$err" | grep -qF -- "$expected" || fail "$what said: $err (expected: $expected)"
  [ $elapsed -le $(( most * 1000 )) ] || fail "$what: took $elapsed ms (at most $most s): $err"
}

# A name that cannot resolve fails at once, far within the timeout, on every rank.
for rank in 0 1; do
  expect_rank_error $rank 10 \
    "[comm] rank $rank cannot resolve the rendezvous address no.such.host.invalid:29500" \
    no.such.host.invalid 29500 --timeout 60
done

# A listener that is no store: its port is in use for rank 0, and rank 1
# waits on it in vain. It prints its port, then sleeps until killed.
python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("", 0))
s.listen(8)
print(s.getsockname()[1], flush=True)
time.sleep(600)
' > "$tmp/port" &
pids+=($!)
for _ in $(seq 1 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
[ -n "$port" ] || fail "the listener did not start"
expect_rank_error 0 10 \
  "[comm] rank 0 could not host the rendezvous store on 127.0.0.1:$port: port $port is in use" \
  127.0.0.1 "$port" --timeout 60
# LibTorch 1.13 connects and then waits to join the process group "through
# the store at ..."; 2.x pings the store in its constructor, with no timeout
# of its own, and baton gives up "...store at ..." past --timeout + 5 s.
expect_rank_error 1 20 "store at 127.0.0.1:$port" 127.0.0.1 "$port" --timeout 2

# No listener at all: rank 1 retries until its timeout, then names the address.
free=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
expect_rank_error 1 20 "could not reach rank 0's rendezvous store at 127.0.0.1:$free within 2 s" \
  127.0.0.1 "$free" --timeout 2
echo "1 passed, 0 failed"
