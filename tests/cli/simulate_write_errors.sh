#!/usr/bin/env bash
# Issue 7.6: write errors were ignored: `simulate --json > /dev/full` and a
# closed standard output exited 0. Now: one line naming what could not be
# written, exit code 1 (a failure while running, not bad input).
set -u
baton=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

expect_failure() {  # expect_failure "<expected text>" "<what>" rc err
  local expected=$1 what=$2 rc=$3 err=$4
  [ "$rc" -eq 1 ] || fail "$what: exit $rc (expected 1): $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$what: more than one line: $err"
  printf '%s' "$err" | grep -qF -- "$expected" || fail "$what said: $err (expected: $expected)"
}

if [ -w /dev/full ]; then
  err=$("$baton" simulate --json 2>&1 >/dev/full); rc=$?
  expect_failure "cannot write to standard output: No space left on device" "--json > /dev/full" $rc "$err"
  # Text larger than the stream's buffer fails while printing, not only at the end.
  err=$("$baton" simulate --pp 32 --microbatches 256 --grid --print-schedule 2>&1 >/dev/full); rc=$?
  expect_failure "cannot write to standard output" "--grid > /dev/full" $rc "$err"
  err=$("$baton" simulate --svg /dev/full 2>&1 >/dev/null); rc=$?
  expect_failure "--svg \"/dev/full\" was not written" "--svg /dev/full" $rc "$err"
fi

err=$("$baton" simulate --json 2>&1 >&-); rc=$?
expect_failure "standard output is closed" "closed stdout" $rc "$err"
# Checked first, so the SVG file does not take the closed descriptor's place.
err=$("$baton" simulate --svg "$tmp/a.svg" 2>&1 >&-); rc=$?
expect_failure "standard output is closed" "closed stdout with --svg" $rc "$err"
[ ! -e "$tmp/a.svg" ] || fail "closed stdout still wrote the SVG"

"$baton" simulate --json > "$tmp/ok.json" || fail "a writable stdout exit $?"
grep -q '"makespan"' "$tmp/ok.json" || fail "no JSON written"
echo "1 passed, 0 failed"
