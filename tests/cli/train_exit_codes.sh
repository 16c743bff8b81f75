#!/usr/bin/env bash
# Issue 16.10: one convention for the launcher's exit code. A rank killed by
# signal N gives 128 + N (137 for SIGKILL, 143 for SIGTERM), and so does the
# launcher stopped by signal N (SIGTERM gave 130, SIGINT's code); a rank that
# stopped responding, so that the others timed out, is a runtime fault: 1.
source "$(dirname "$0")/lib/common.sh"

# start_job: starts a silent two-rank job in the background and waits for both ranks.
start_job() {
  fresh "$tmp/out" "$tmp/err"
  "$baton" train "${J[@]}" --hidden 16 --steps 1000000 --threads 1 --timeout "${1:-600}" \
    --log-every 1000000 > "$tmp/out" 2> "$tmp/err" &
  launcher=$!
  pids+=($launcher)
  for _ in $(seq 1 300); do grep -qs "^\[rank 0\] baton train: model" "$tmp/out" && break; sleep 0.2; done
  grep -q "baton train: model" "$tmp/out" || fail "training did not start: $(cat "$tmp/err")"
  sleep 0.5
}

# rank_pid <rank>: the launcher's child process that runs that rank.
rank_pid() {
  local p
  for p in $(pgrep -P "$launcher"); do
    tr '\0' '\n' < "/proc/$p/environ" | grep -qx "RANK=$1" && { echo "$p"; return; }
  done
}

# expect_exit <code> <what> <text>: the launcher exits with that code within
# 60 s (a loaded machine) and its stderr holds the text.
expect_exit() {
  local code=$1 what=$2 text=$3 rc
  for _ in $(seq 1 600); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$launcher" 2>/dev/null && fail "$what: the launcher still runs after 60 s: $(cat "$tmp/err")"
  wait "$launcher"; rc=$?
  [ $rc -eq "$code" ] || fail "$what: exit $rc (expected $code): $(cat "$tmp/err")"
  grep -qF -- "$text" "$tmp/err" || fail "$what: no '$text' in: $(cat "$tmp/err")"
}

for signal in KILL TERM; do
  start_job
  victim=$(rank_pid 1)
  [ -n "$victim" ] || fail "no process for rank 1"
  kill -$signal "$victim"
  number=$(kill -l $signal)
  expect_exit $((128 + number)) "rank 1 killed by SIG$signal" \
    "[launch] rank 1 was killed by signal $number"
done

for signal in TERM INT; do
  start_job
  # A background job of a script ignores SIGINT until the launcher handles it.
  kill -$signal "$launcher"
  expect_exit $((128 + $(kill -l $signal))) "SIG$signal to the launcher" \
    "[launch] interrupted by SIG$signal; stopping 2 rank(s)"
done

start_job 2
victim=$(rank_pid 1)
[ -n "$victim" ] || fail "no process for rank 1"
pids+=($victim)
kill -STOP "$victim"
expect_exit 1 "rank 1 stopped (SIGSTOP)" "[launch] rank 1 stopped responding"
echo "1 passed, 0 failed"
