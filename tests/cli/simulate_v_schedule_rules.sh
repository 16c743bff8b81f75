#!/usr/bin/env bash
# Issue 10: dualpipev, v-half and v-min simulate, draw and report their peaks;
# dualpipev's rule m >= 2p (PyTorch's ScheduleDualPipeV) is refused with one
# line naming it and exit code 2, before anything is built.
source "$(dirname "$0")/lib/common.sh"

expect_bad_input_of simulate "[schedule.dualpipev] needs m >= 2p" --schedule dualpipev --pp 4 --microbatches 7
expect_bad_input_of simulate "got m=3, p=2 (try m=4)" --schedule dualpipev --pp 2 --microbatches 3
expect_bad_input_of simulate "--virtual 3 is not defined for v-half" --schedule v-half --pp 4 --virtual 3
expect_bad_input_of simulate "--virtual 1 is not defined for v-min" --schedule v-min --pp 4 --virtual 1

# Peak chunks in flight per rank at p = 4, m = 8 with the default costs:
# dualpipev 2p + 1 = 9 (DualPipe's PP + 1), v-half at most p + 2 = 6, v-min at
# most 2 * ((p + 4) / 3) = 4; each one's bubble below 1f1b's.
for case in "dualpipev 9" "v-half 6" "v-min 4"; do
  set -- $case
  "$baton" simulate --schedule "$1" --pp 4 --microbatches 8 --json > "$tmp/$1.json" || fail "$1 exit $?"
  python3 - "$tmp/$1.json" "$2" <<'PY' || fail "$1: $(cat "$tmp/$1.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert max(d["peak_inflight"]) <= int(sys.argv[2]), d["peak_inflight"]
assert d["schedule"] != "dualpipev" or d["peak_inflight"][0] == int(sys.argv[2]), d["peak_inflight"]
assert d["bubble_fraction"] < 0.2727, d["bubble_fraction"]  # 1f1b: 3/11
PY
done
exit 0
