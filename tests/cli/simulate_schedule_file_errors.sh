#!/usr/bin/env bash
# Errors about schedule files stay one line (plus a bounded grid) whatever the
# file holds. Issue 7.13: an invalid 14 MB file printed 16.5 MB of grid.
# Issue 7.14: a NUL byte cut the message off. Issue 7.17: stages=99999 was
# reported as a map mismatch.
set -u
baton=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

run() {  # run args...: sets err and rc
  err=$(timeout 120 "$baton" simulate "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "'$*' exit $rc (expected 2): $(printf '%s' "$err" | head -c 500)"
}

# 7.13: 64 ranks of 8192 actions (about 4 MB), one B before its F on rank 40.
awk 'BEGIN { for (r = 0; r < 64; ++r) { line = "";
       for (m = 0; m < 4096; ++m) line = line (m ? " " : "") r "F" m " " r "B" m;
       if (r == 40) sub(/40F2000 40B2000/, "40B2000 40F2000", line);
       print line } }' > "$tmp/big.txt"
run --schedule-file "$tmp/big.txt"
[ ${#err} -lt 16384 ] || fail "the error of a large file is ${#err} bytes"
printf '%s\n' "$err" | head -1 | grep -qF "rank 40: stage 40 micro-batch 2000 runs B before F" \
  || fail "first line: $(printf '%s' "$err" | head -1)"
printf '%s' "$err" | grep -qF ">40B2000<" || fail "no mark: $err"
printf '%s' "$err" | grep -qF "rank 38 | ..." || fail "no window around rank 40: $err"

# 7.14: a NUL byte shows as \x00 and the message goes on after it.
printf '0F0 0\0B0 0B0\n' > "$tmp/nul.txt"
run --schedule-file "$tmp/nul.txt"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "NUL: more than one line: $err"
printf '%s' "$err" | grep -qF 'action "0\x00B0" has unknown kind "\x00B" (expected F, B' \
  || fail "NUL: $err"

# Control bytes in a header value stay escaped, on one line.
printf '# baton schedule: map=a\001\033[2J\n0F0 0B0\n' > "$tmp/ctl.txt"
run --schedule-file "$tmp/ctl.txt"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "control bytes: more than one line: $err"
printf '%s' "$err" | grep -qF 'map "a\x01\x1b[2J"' || fail "control bytes: $err"

# 7.17: a stage count the actions do not have is named as such.
printf '# baton schedule: stages=99999 map=loop\n0F0 0B0\n1F0 1B0\n' > "$tmp/stages.txt"
run --schedule-file "$tmp/stages.txt"
printf '%s' "$err" | grep -qF "header says stages=99999 but the actions name stages 0..1 only" \
  || fail "stages: $err"
printf '# baton schedule: stages=99999999\n0F0 0B0\n' > "$tmp/stages2.txt"
run --schedule-file "$tmp/stages2.txt"
printf '%s' "$err" | grep -qF "stages=99999999 exceeds the limit of 4194304" || fail "stages: $err"

# A path with a newline is escaped in the message.
run --schedule-file "$tmp/no
such"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "path with a newline: $err"

# Flag values with a newline stay on one line too, whoever reports them.
escaped_one_line() {  # escaped_one_line args...
  err=$("$baton" simulate "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "'$*' exit $rc"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "'$*' printed more than one line: $err"
  printf '%s' "$err" | grep -qF '\x0a' || fail "'$*' said: $err"
}
escaped_one_line --pp $'1\n2'
escaped_one_line --schedule $'x\ny'
escaped_one_line $'--bo\ngus'
echo "1 passed, 0 failed"
