#!/usr/bin/env bash
# Issue 7.5: --svg and --trace paths were checked only after training, where
# the failure surfaced on rank 1 as a closed connection. Every output path is
# checked before any rank starts, and two outputs may not share a file.
source "$(dirname "$0")/lib/common.sh"
for flag in --svg --trace --metrics; do
  expect_bad_input "$flag \"/tmp/nonexistent_dir_$$/a.out\": folder \"/tmp/nonexistent_dir_$$\" does not exist" \
    "${T[@]}" $flag /tmp/nonexistent_dir_$$/a.out
  expect_bad_input "$flag \"$tmp\" is a folder" "${T[@]}" $flag "$tmp"
done
expect_bad_input "--trace and --svg name the same file \"$tmp/./x\"" \
  "${T[@]}" --trace "$tmp/x" --svg "$tmp/./x"
expect_bad_input "--metrics and --trace name the same file" "${T[@]}" --metrics "$tmp/m" --trace "$tmp/m"
if [ "$(id -u)" -ne 0 ]; then
  mkdir "$tmp/ro" && chmod 555 "$tmp/ro"
  expect_bad_input "cannot be created: Permission denied" "${T[@]}" --svg "$tmp/ro/a.svg"
fi
# Nothing was created by the checks.
[ -z "$(ls "$tmp" | grep -v '^ro$')" ] || fail "the checks created files: $(ls "$tmp")"
# The same outputs, valid, are written.
"$baton" train "${T[@]}" --threads 1 --metrics "$tmp/m.jsonl" --trace "$tmp/t.json" --svg "$tmp/s.svg" \
  >/dev/null 2>"$tmp/err" || fail "valid outputs: $(cat "$tmp/err")"
for f in m.jsonl t.json s.svg; do [ -s "$tmp/$f" ] || fail "$f not written"; done
echo "1 passed, 0 failed"
