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
# dualpipev 2p + 1 on rank 0 (DualPipe's PP + 1), v-half at most p + 2,
# v-min at most 2 * ((p + 4) / 3) = 4.
out=$("$baton" simulate --schedule dualpipev --pp 4 --microbatches 8 --json) || fail "dualpipev exit $?"
echo "$out" | grep -q '"peak_inflight":\[9,' || fail "dualpipev inflight: $out"
out=$("$baton" simulate --schedule v-half --pp 4 --microbatches 8 --json) || fail "v-half exit $?"
echo "$out" | grep -q '"peak_inflight":\[6,6,6,6\]' || fail "v-half inflight: $out"
out=$("$baton" simulate --schedule v-min --pp 4 --microbatches 8 --json) || fail "v-min exit $?"
echo "$out" | grep -q '"peak_inflight":\[4,4,4,4\]' || fail "v-min inflight: $out"
exit 0
