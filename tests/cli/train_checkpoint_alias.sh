#!/usr/bin/env bash
# --checkpoint (and the TOML key "checkpoint") is the deprecated name of
# --recompute (issue 8.5): it still sets the recomputation mode and warns once
# per job on stderr, not once per rank.
source "$(dirname "$0")/lib/common.sh"

timeout 120 "$baton" train "${T[@]}" --threads 1 --checkpoint always >"$tmp/out" 2>"$tmp/err" \
  || fail "--checkpoint run failed: $(tail -3 "$tmp/err")"
[ "$(grep -c "deprecated" "$tmp/err")" -eq 1 ] || fail "expected one warning, got: $(cat "$tmp/err")"
grep -qF -- "--checkpoint is deprecated, use --recompute" "$tmp/err" || fail "warning text: $(cat "$tmp/err")"
grep -q "recompute always" "$tmp/out" || fail "--checkpoint did not set recompute: $(head -1 "$tmp/out")"

printf 'model = "mlp"\ncheckpoint = "except_last"\n' > "$tmp/old.toml"
timeout 120 "$baton" train --config "$tmp/old.toml" "${T[@]}" --threads 1 >"$tmp/out" 2>"$tmp/err" \
  || fail "TOML checkpoint run failed: $(tail -3 "$tmp/err")"
[ "$(grep -c "deprecated" "$tmp/err")" -eq 1 ] || fail "expected one TOML warning, got: $(cat "$tmp/err")"
grep -qF 'key "checkpoint" is deprecated, use "recompute"' "$tmp/err" || fail "TOML warning: $(cat "$tmp/err")"
grep -q "recompute except_last" "$tmp/out" || fail "TOML checkpoint did not set recompute: $(head -1 "$tmp/out")"

# The new name warns about nothing.
timeout 120 "$baton" train "${T[@]}" --threads 1 --recompute always >"$tmp/out" 2>"$tmp/err" \
  || fail "--recompute run failed: $(tail -3 "$tmp/err")"
! grep -q "deprecated" "$tmp/err" || fail "--recompute warned: $(cat "$tmp/err")"
expect_bad_input "--checkpoint and --recompute both given" "${T[@]}" --checkpoint always --recompute never
echo PASS
