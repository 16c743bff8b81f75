#!/usr/bin/env bash
# Issue 7.7: --timeout inf or 1e300 overflowed a cast (undefined behaviour) and
# then said "timeout must be positive, got -9223372036854775808 ms". Non-finite
# and absurd timeouts (over a week) are rejected up front.
source "$(dirname "$0")/lib/common.sh"
for t in inf -inf nan 1e300 604801 0 -1 0.0001; do
  expect_bad_input "timeout must be between 0.001 and 604800 seconds (one week), got" "${T[@]}" --timeout $t
done
printf 'timeout = inf\n' > "$tmp/inf.toml"
expect_bad_input "timeout must be between" --config "$tmp/inf.toml" "${T[@]}"
"$baton" train "${T[@]}" --threads 1 --timeout 604800 >/dev/null 2>&1 || fail "a week's timeout was refused"
echo "1 passed, 0 failed"
