#!/usr/bin/env bash
# Issue 7.17: --schedule-file silently ignored --pp, --microbatches and
# --schedule, and a repeated flag said "At Most 1 required but received 2".
# Both are refused with one line naming the flag, exit code 2.
source "$(dirname "$0")/lib/common.sh"
check() { expect_bad_input_of simulate "$@"; }  # check "<expected text>" args...

printf '0F0 0B0\n' > "$tmp/s.txt"
for flag in "--pp 4" "--microbatches 8" "--schedule gpipe" "--virtual 2"; do
  check "${flag%% *} cannot be combined with --schedule-file" --schedule-file "$tmp/s.txt" $flag
done
check "--schedule-file needs a file name" --schedule-file ''
check "--pp given more than once" --pp 2 --pp 3
check "--schedule given more than once" --schedule gpipe --schedule 1f1b
check "--svg given more than once" --svg "$tmp/a.svg" --svg "$tmp/b.svg"
[ ! -e "$tmp/a.svg" ] && [ ! -e "$tmp/b.svg" ] || fail "a refused run wrote an SVG"

# Flags without a value may repeat; the file alone, with costs, runs.
"$baton" simulate --json --json --pp 2 > /dev/null || fail "--json twice exit $?"
"$baton" simulate --schedule-file "$tmp/s.txt" --tf 2 --json | grep -q '"makespan":4' \
  || fail "schedule file with --tf"
echo "1 passed, 0 failed"
