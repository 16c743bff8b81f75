#!/usr/bin/env bash
# Issue 20: `baton train --schedule interleaved-zb` runs on 2 ranks (2 chunks
# each, the loop map, I and W split), with --virtual 3 too, and refuses
# --virtual 1 and an m that does not split into equal groups before starting
# ranks.
source "$(dirname "$0")/lib/common.sh"

for v in 2 3; do
  timeout 300 "$baton" train --model mlp --layers 6 --hidden 16 --batch 8 --microbatches 4 --pp 2 \
    --virtual $v --nproc 2 --steps 2 --threads 1 --schedule interleaved-zb > "$tmp/v$v.out" 2>&1 \
    || fail "v=$v run: $(tail -5 "$tmp/v$v.out")"
  grep -q "schedule interleaved-zb, pp=2, stages=$((2 * v))," "$tmp/v$v.out" \
    || fail "v=$v header: $(head -2 "$tmp/v$v.out")"
  grep -q '\[rank 0\] step 2/2  loss' "$tmp/v$v.out" || fail "v=$v progress: $(tail -5 "$tmp/v$v.out")"
done
expect_bad_input "[schedule.interleaved-zb] --virtual 1 is one stage per rank (use schedule zb-h1)" \
  "${T[@]}" --schedule interleaved-zb --virtual 1
expect_bad_input "[schedule.interleaved-zb] micro-batches m=5 with pp=2" \
  --model mlp --layers 4 --hidden 16 --batch 10 --microbatches 5 --pp 2 --nproc 2 --steps 2 \
  --schedule interleaved-zb
exit 0
