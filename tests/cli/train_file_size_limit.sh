#!/usr/bin/env bash
# Issue 30, item 8: under a file size limit (ulimit -f) baton is not killed by
# SIGXFSZ with an empty stderr. A save past the limit fails as a full disk
# does: exit 1, one line naming the file and "File too large", and no
# temporary file or partial step folder left. The shared-memory transport,
# whose inboxes count against the limit, is refused before any rank starts,
# in one line naming the limit and --transport gloo.
source "$(dirname "$0")/lib/common.sh"

W=(--model mlp --layers 4 --hidden 256 --batch 8 --microbatches 2 --steps 1 --threads 1)
# No `trap '' XFSZ` here: the signal's default would kill the process.
(ulimit -f 64; timeout 300 "$baton" train "${W[@]}" --pp 1 --save "$tmp/ck" > "$tmp/one.out" 2> "$tmp/one.err")
rc=$?
[ $rc -eq 1 ] || fail "a save past the file size limit: exit $rc (expected 1): $(cat "$tmp/one.err")"
[ "$(wc -l < "$tmp/one.err")" -eq 1 ] || fail "not one line: $(cat "$tmp/one.err")"
grep -q "cannot write .*File too large" "$tmp/one.err" || fail "the line does not say why: $(cat "$tmp/one.err")"
left=$(find "$tmp/ck" -name '*.tmp.*' -o -name '*.partial')
[ -z "$left" ] || fail "the failed save left: $left"

(ulimit -f 64; timeout 300 "$baton" train "${W[@]}" --pp 2 --nproc 2 > "$tmp/two.out" 2> "$tmp/two.err")
rc=$?
[ $rc -eq 2 ] || fail "shared memory under the limit: exit $rc (expected 2): $(cat "$tmp/two.err")"
[ "$(wc -l < "$tmp/two.err")" -eq 1 ] || fail "not one line: $(cat "$tmp/two.err")"
grep -q "file size limit of 65536 bytes (ulimit -f); raise the limit, or use --transport gloo" "$tmp/two.err" \
  || fail "the line does not name the limit: $(cat "$tmp/two.err")"
grep -q "^step" "$tmp/two.out" && fail "ranks trained before the refusal"
echo "1 passed, 0 failed"
