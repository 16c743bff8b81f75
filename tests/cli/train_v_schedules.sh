#!/usr/bin/env bash
# Issue 10: `baton train` runs dualpipev, v-half and v-min on 2 ranks (4
# stages, the V map), and refuses dualpipev with m < 2p before starting ranks.
source "$(dirname "$0")/lib/common.sh"

for s in dualpipev v-half v-min; do
  timeout 300 "$baton" train --model mlp --layers 4 --hidden 16 --batch 8 --microbatches 4 --pp 2 \
    --nproc 2 --steps 2 --threads 1 --schedule "$s" > "$tmp/$s.out" 2>&1 \
    || fail "$s run: $(tail -5 "$tmp/$s.out")"
  grep -q '\[rank 0\] step 2/2  loss' "$tmp/$s.out" || fail "$s progress: $(tail -5 "$tmp/$s.out")"
done
expect_bad_input "[schedule.dualpipev] needs m >= 2p" "${T[@]}" --schedule dualpipev
exit 0
