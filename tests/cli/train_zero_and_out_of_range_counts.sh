#!/usr/bin/env bash
# Issue 7.17: --steps 0 silently ran 100 steps; --virtual 0 ran with the
# schedule's default (simulate rejects it); --seed 18446744073709551616 was
# accepted (CLI11's strtoull saturates). All are rejected, as are the same
# values in a TOML config.
source "$(dirname "$0")/lib/common.sh"
expect_bad_input "--steps: must be an integer in [1, 2147483647], got 0" "${J[@]}" --hidden 16 --steps 0
expect_bad_input "--epochs: must be an integer in [1, 2147483647], got 0" "${T[@]}" --epochs 0
expect_bad_input "--virtual: Value 0 not in range" "${T[@]}" --virtual 0
expect_bad_input "--seed: must be an integer in [0, 18446744073709551615], got 18446744073709551616" \
  "${T[@]}" --seed 18446744073709551616
expect_bad_input "--seed: must be an integer in [0, 18446744073709551615], got -1" "${T[@]}" --seed -1
for key in steps epochs; do
  printf '%s = 0\n' "$key" > "$tmp/$key.toml"
  expect_bad_input "key \"$key\" must be an integer in [1, 2147483647], got 0" --config "$tmp/$key.toml" "${T[@]}"
done
# --virtual's range, as the flag's (options.h): [1, 1024].
printf 'virtual = 0\n' > "$tmp/virtual.toml"
expect_bad_input 'key "virtual" must be an integer in [1, 1024], got 0' --config "$tmp/virtual.toml" "${T[@]}"
printf 'seed = -1\n' > "$tmp/seed.toml"
expect_bad_input "key \"seed\" must be an integer in [0, 9223372036854775807], got -1" --config "$tmp/seed.toml"
printf 'layers = 4294967300\n' > "$tmp/layers.toml"
expect_bad_input "key \"layers\" must be an integer in [-2147483648, 2147483647], got 4294967300" --config "$tmp/layers.toml"
"$baton" train "${T[@]}" --threads 1 --seed 18446744073709551615 >/dev/null 2>"$tmp/err" \
  || fail "the largest seed was refused: $(cat "$tmp/err")"
echo "1 passed, 0 failed"
