#!/usr/bin/env bash
# Issue 7.12: `simulate --svg outs/b.svg --trace /proc/x` exited 2 but left
# b.svg behind, and `--svg X --trace X` wrote both to X. Every output path is
# checked before anything is written; one file named twice is refused.
set -u
baton=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

check() {  # check "<expected text>" args...
  local expected=$1; shift
  local err rc
  err=$(cd "$tmp" && timeout 60 "$baton" simulate "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "'$*' exit $rc (expected 2): $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "'$*' printed more than one line: $err"
  printf '%s' "$err" | grep -qF -- "$expected" || fail "'$*' said: $err (expected: $expected)"
}

mkdir "$tmp/outs"
check '--trace "/proc/x" cannot be created' --svg outs/b.svg --trace /proc/x
[ -z "$(ls -A "$tmp/outs")" ] || fail "a failed run left $(ls "$tmp/outs") behind"
check '--trace "outs/none/t.json": folder' --svg outs/b.svg --trace outs/none/t.json
check 'does not exist' --svg outs/b.svg --trace outs/none/t.json
check '--svg "outs" is a folder' --svg outs
check '--svg and --trace name the same file "X"' --svg X --trace X
check '--svg and --trace name the same file "outs/../X"' --svg ./X --trace outs/../X
ln -s "$tmp/outs/real.svg" "$tmp/link.svg"
check 'name the same file' --svg link.svg --trace outs/real.svg
printf '0F0 0B0\n' > "$tmp/s.txt"
check '--schedule-file and --trace name the same file "./s.txt"' --schedule-file s.txt --trace ./s.txt
grep -q '0F0 0B0' "$tmp/s.txt" || fail "the schedule file was overwritten"
check '--svg needs a file name' --svg ''
[ -z "$(ls -A "$tmp/outs")" ] && [ ! -e "$tmp/X" ] || fail "a refused run wrote a file"

# An existing file in the way is overwritten, as before.
echo old > "$tmp/outs/b.svg"
(cd "$tmp" && "$baton" simulate --svg outs/b.svg --trace outs/b.json > /dev/null) || fail "exit $?"
grep -q '<svg' "$tmp/outs/b.svg" && grep -q traceEvents "$tmp/outs/b.json" || fail "outputs missing"
echo "1 passed, 0 failed"
