#!/usr/bin/env bash
# Issue 7.3: `simulate --pp 4096 --microbatches 1048576` tried to build tens of
# billions of actions (bad_alloc). Sizes past the limit are refused before
# anything is built: one line naming the size and the limit, exit code 2.
source "$(dirname "$0")/lib/common.sh"
check() { expect_bad_input_of simulate "$@"; }  # check "<expected text>" args...

check "1f1b with pp=4096, m=1048576 and 4096 stages would have up to 25769803776 actions (4096 stages x 1048576 micro-batches x 6), more than the limit of 50000000" \
  --pp 4096 --microbatches 1048576
check "more than the limit of 50000000" --schedule zb-h1 --pp 4096 --microbatches 4096
check "interleaved with pp=4096, m=65536 and 4194304 stages" --schedule interleaved --pp 4096 --virtual 1024 --microbatches 65536

# A small file naming a huge stage and micro-batch: refused before the tables.
printf '0F0\n4000000F1000000\n' > "$tmp/pairs.txt"
check "(stage, micro-batch) pairs, but the file has only 2 actions" --schedule-file "$tmp/pairs.txt"
printf '# baton schedule: microbatches=2000000000\n0F0 0B0\n' > "$tmp/header.txt"
check "microbatches=2000000000 exceeds the limit of 1048576" --schedule-file "$tmp/header.txt"

# Below the limit still runs.
"$baton" simulate --pp 64 --microbatches 1024 --json > /dev/null || fail "p=64 m=1024 exit $?"
echo "1 passed, 0 failed"
