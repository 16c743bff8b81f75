#!/usr/bin/env bash
# `--realtime on` (baton/core/realtime.h): the kernel's view of the ranks'
# class (/proc/PID/stat's policy field, 1 = SCHED_FIFO) while they train is
# the independent witness; without CAP_SYS_NICE and with `ulimit -r` 0 it is
# refused in one line before any rank starts.
source "$(dirname "$0")/lib/common.sh"
# Refused without the rights (setpriv drops CAP_SYS_NICE for the command it runs).
# (Dropping a capability from the bounding set needs CAP_SETPCAP: as an ordinary
# user this part is skipped, and the next one then skips the rest.)
if command -v prlimit >/dev/null && setpriv --bounding-set -sys_nice true 2>/dev/null; then
  err=$(prlimit --rtprio=0 setpriv --bounding-set -sys_nice --inh-caps -sys_nice \
        "$baton" train "${T[@]}" --realtime on 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "expected exit 2 without the rights, got $rc: $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "expected one line, got: $err"
  printf '%s' "$err" | grep -q "CAP_SYS_NICE" || fail "the refusal names no right: $err"
fi
if ! chrt -f 1 true 2>/dev/null; then
  echo "skipped: this shell may not use SCHED_FIFO"; exit 77
fi
# Allowed: the ranks run in SCHED_FIFO while they train, and say so.
"$baton" train "${J[@]}" --hidden 16 --steps 400 --realtime on > "$tmp/out" 2>&1 &
pids+=($!)
# Polled until both ranks are seen in it (a rank enters it once started) or the run ends.
policies=""
for _ in $(seq 1 600); do
  policies=""
  for pid in $(pgrep -P "${pids[0]}" || true); do
    policy=$(awk '{print $(NF-11)}' "/proc/$pid/stat" 2>/dev/null)  # field 41, policy
    [ -n "$policy" ] && policies="$policies $pid:$policy"
  done
  [ "$(printf '%s' "$policies" | grep -o ':1' | wc -l)" -eq 2 ] && break
  kill -0 "${pids[0]}" 2>/dev/null || break
  sleep 0.05
done
wait "${pids[0]}" || fail "train --realtime on failed: $(cat "$tmp/out")"
grep -q "real-time (SCHED_FIFO)" "$tmp/out" || fail "the header does not say real-time: $(head -2 "$tmp/out")"
[ "$(printf '%s' "$policies" | grep -o ':1' | wc -l)" -eq 2 ] \
  || fail "expected both ranks in SCHED_FIFO (1) while training, saw (pid:policy):$policies"
echo "1 passed, 0 failed"
