#!/usr/bin/env bash
# Issue 31: docs/cli.md names every flag each command accepts (read off its
# --help), every TOML key baton train reads (off the unknown-key refusal,
# which lists them), every schedule and every model, so the reference cannot
# drift from the code without this test failing.
source "$(dirname "$0")/lib/common.sh"
doc="$(dirname "$0")/../../docs/cli.md"
[ -f "$doc" ] || fail "no docs/cli.md at $doc"
missing=()

# flags_of <command words...>: the --flags its --help lists.
flags_of() { "$baton" "$@" --help 2>&1 | grep -oE '^ +(-[a-zA-Z], )?--[a-z0-9-]+' | grep -oE -- '--[a-z0-9-]+' | sort -u; }
for command in "train" "simulate" "plan" "data prepare" "data inspect"; do
  # shellcheck disable=SC2086
  flags=$(flags_of $command)
  [ -n "$flags" ] || fail "baton $command --help lists no flags"
  for flag in $flags; do
    [ "$flag" = "--help" ] && continue
    grep -qF -- "\`$flag" "$doc" || missing+=("baton $command $flag")
  done
done

# TOML keys: the refusal of an unknown key lists the known ones.
printf 'no_such_key = 1\n' > "$tmp/unknown.toml"
keys=$("$baton" train --config "$tmp/unknown.toml" 2>&1 | sed -n 's/.*(known: \(.*\)).*/\1/p' | tr -d ' ' | tr ',' ' ')
[ -n "$keys" ] || fail "the unknown-key refusal lists no keys"
for key in $keys; do
  grep -qF -- "\`$key\`" "$doc" || missing+=("TOML key $key")
done

# Schedules and models, as the refusals of unknown ones list them.
schedules=$("$baton" train --schedule no-such 2>&1 | sed -n 's/.*(expected \(.*\)).*/\1/p' | sed 's/ or /, /' | tr -d ' ' | tr ',' ' ')
[ -n "$schedules" ] || fail "the unknown-schedule refusal lists no schedules"
for s in $schedules; do grep -qF -- "\`$s\`" "$doc" || missing+=("schedule $s"); done
for m in mlp cnn gpt llama resnet; do
  "$baton" train --model "$m" --help > /dev/null 2>&1 || fail "model $m"
  grep -qF -- "\`$m\`" "$doc" || missing+=("model $m")
done
"$baton" train --model no-such 2>&1 | grep -q "expected mlp, cnn, gpt, llama or resnet" \
  || fail "the model list in the refusal changed: update this test's list"

[ ${#missing[@]} -eq 0 ] || fail "docs/cli.md does not name: ${missing[*]}"
echo "1 passed, 0 failed"
