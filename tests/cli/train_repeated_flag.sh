#!/usr/bin/env bash
# Issue 7.17: a repeated flag of `baton train` said CLI11's "At Most 1 required
# but received 2". Like simulate and plan, train refuses it with one line
# naming the flag, exit code 2, before starting any rank.
source "$(dirname "$0")/lib/common.sh"
expect_bad_input "[train] --pp given more than once" "${T[@]}" --pp 3
expect_bad_input "[train] --nproc given more than once" "${T[@]}" --nproc 3
expect_bad_input "[train] --schedule given more than once" "${T[@]}" --schedule gpipe --schedule 1f1b
expect_bad_input "[train] --svg given more than once" "${T[@]}" --svg "$tmp/a.svg" --svg "$tmp/b.svg"
[ ! -e "$tmp/a.svg" ] && [ ! -e "$tmp/b.svg" ] || fail "a refused run wrote an SVG"
# Flags without a value may repeat.
"$baton" train "${T[@]}" --threads 1 --step-barrier --step-barrier >/dev/null 2>"$tmp/err" \
  || fail "--step-barrier twice: $(cat "$tmp/err")"
echo "1 passed, 0 failed"
