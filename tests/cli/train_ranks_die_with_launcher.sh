#!/usr/bin/env bash
# Issue 7.2: SIGKILL to `baton train --nproc 2` left both ranks training.
# Ranks die with their launcher (PR_SET_PDEATHSIG), within a few seconds.
source "$(dirname "$0")/lib/common.sh"
job="baton-pdeathsig-$$-$RANDOM"
# Silent ranks (no progress lines), so no SIGPIPE on a write to the dead
# launcher's pipe can stop them by chance.
BATON_TEST_JOB=$job "$baton" train "${J[@]}" --hidden 16 --steps 1000000 --threads 1 --timeout 600 \
  --log-every 1000000 > "$tmp/out" 2> "$tmp/err" &
launcher=$!
pids+=($launcher)
for _ in $(seq 1 150); do grep -q "^\[rank 0\] baton train: model" "$tmp/out" && break; sleep 0.2; done
grep -q "baton train: model" "$tmp/out" || fail "training did not start: $(cat "$tmp/err")"
sleep 1

# The rank processes of this job: those whose environment holds the marker.
job_ranks() {
  for e in /proc/[0-9]*/environ; do
    { tr "\\0" "\\n" < "$e" | grep -qx "BATON_TEST_JOB=$job"; } 2>/dev/null || continue
    p=${e#/proc/}; p=${p%/environ}
    [ "$p" != "$launcher" ] && echo "$p"
  done
}
ranks=$(job_ranks)
[ "$(echo "$ranks" | wc -w)" -eq 2 ] || fail "expected 2 rank processes, found: $ranks"
pids+=($ranks)
kill -9 $launcher
wait $launcher 2>/dev/null
for _ in $(seq 1 50); do [ -z "$(job_ranks)" ] && break; sleep 0.1; done
left=$(job_ranks)
[ -z "$left" ] || fail "rank processes still running 5 s after the launcher was killed: $left"
echo "1 passed, 0 failed"
