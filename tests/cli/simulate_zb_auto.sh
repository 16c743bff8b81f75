#!/usr/bin/env bash
# zb-auto: searched with the costs of the flags, never slower than zb-h1 at
# 1F1B's memory or zb-h2 at its own; --memory-limit is zb-auto's only; and
# baton train runs it on profiled costs.
source "$(dirname "$0")/lib/common.sh"
costs=(--pp 4 --microbatches 8 --tf 1 --tb 3 --tw 1 --comm 0.5)
makespan() {
  "$baton" simulate "${costs[@]}" "$@" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["makespan"])'
}
auto=$(makespan --schedule zb-auto) || fail "zb-auto failed"
h1=$(makespan --schedule zb-h1) || fail "zb-h1 failed"
python3 -c "import sys; sys.exit(0 if $auto <= $h1 else 1)" || fail "zb-auto $auto slower than zb-h1 $h1"
auto7=$(makespan --schedule zb-auto --memory-limit 7) || fail "zb-auto --memory-limit 7 failed"
h2=$(makespan --schedule zb-h2) || fail "zb-h2 failed"
python3 -c "import sys; sys.exit(0 if $auto7 <= $h2 else 1)" || fail "zb-auto at 2p-1 $auto7 slower than zb-h2 $h2"
expect_bad_input_of simulate "--memory-limit is zb-auto's; --schedule 1f1b sets its own memory" \
  --schedule 1f1b --memory-limit 3
expect_bad_input_of simulate "--memory-limit" --schedule zb-auto --memory-limit 0
# The training half needs the torch build; without it only the simulator's is checked.
if ! "$baton" train 2>&1 | grep -q "built without LibTorch"; then
  out=$("$baton" train "${T[@]}" --schedule zb-auto 2>&1) || fail "train zb-auto: $out"
  printf '%s' "$out" | grep -q "final loss" || fail "train zb-auto printed no final loss: $out"
fi
echo "1 passed, 0 failed"
