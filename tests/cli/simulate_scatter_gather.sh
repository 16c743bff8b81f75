#!/usr/bin/env bash
# `baton simulate --tp 2 --boundary-mb --pp-gbps`: Megatron's scatter/gather
# (on by default) makes the step of a slow pipeline link shorter than sending
# whole boundaries; without --boundary-mb it changes nothing; a value other
# than true/false is refused with one line and exit 2.
source "$(dirname "$0")/lib/common.sh"
S=(simulate --schedule 1f1b --pp 4 --microbatches 8 --tp 2 --pp-gbps 1 --tp-gbps 100 --json)
span() { "$baton" "$@" | python3 -c 'import json,sys; print(json.load(sys.stdin)["makespan"])'; }
on=$(span "${S[@]}" --boundary-mb 8) || fail "on: exit $?"
off=$(span "${S[@]}" --boundary-mb 8 --tp-scatter-gather false) || fail "off: exit $?"
python3 -c "import sys; a, b = map(float, sys.argv[1:]); assert a < b, (a, b)" "$on" "$off" \
  || fail "scatter/gather $on is not below whole boundaries $off"
plain=$(span "${S[@]}") && plain_off=$(span "${S[@]}" --tp-scatter-gather false) || fail "no boundary: exit $?"
[ "$plain" = "$plain_off" ] || fail "without --boundary-mb the flag changed the step: $plain vs $plain_off"
err=$("$baton" "${S[@]}" --tp-scatter-gather maybe 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "bad value: exit $rc: $err"
echo "ok"
