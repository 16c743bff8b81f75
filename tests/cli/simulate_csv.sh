#!/usr/bin/env bash
# Issue 10.1: PyTorch's schedule CSV. `simulate --export-csv` writes one in
# either format, `--schedule-file X.csv` reads one (the wheel's own files
# included), and a malformed one fails with one line naming the line, column
# and rule, exit code 2.
source "$(dirname "$0")/lib/common.sh"
check() { expect_bad_input_of simulate "$@"; }  # check "<expected text>" args...
fixtures=$(dirname "$0")/../schedule/pytorch_csv
json() { "$baton" simulate "$@" --json | sed 's/"schedule":"[^"]*",//'; }

# Every generator, both formats: the file simulates exactly as the generator does.
for s in gpipe 1f1b interleaved zb-h1 zb-h2 zb-v interleaved-zb chimera; do
  for format in compute_only compute_comms; do
    "$baton" simulate --schedule $s --pp 4 --microbatches 8 --export-csv "$tmp/$s.csv" \
      --csv-format $format > /dev/null || fail "$s $format: export exit $?"
    [ "$(json --schedule-file "$tmp/$s.csv" --tf 1 --tb 3 --tw 1)" = \
      "$(json --schedule $s --pp 4 --microbatches 8 --tf 1 --tb 3 --tw 1)" ] \
      || fail "$s $format: the CSV simulates differently"
  done
done
grep -q WAIT_SEND_F "$tmp/zb-v.csv" || fail "compute_comms without WAIT_SEND_F"
head -1 "$tmp/1f1b.csv" | grep -q '^0RECV_B0\|^0F0,0SEND_F0' || fail "1f1b row 0: $(head -1 "$tmp/1f1b.csv")"

# The wheel's interleaved 1F1B, in both formats, is baton's. The compute_comms
# file carries the wheel's REDUCE_GRAD, one per stage where baton puts them, so
# with --dp 2 (baton adds its own to the compute_only file) all is the same.
want=$(json --schedule interleaved --pp 4 --microbatches 8 --dp 2)
for f in interleaved_p4_v2_m8_compute_only interleaved_p4_v2_m8_compute_comms; do
  [ "$(json --schedule-file "$fixtures/$f.csv" --dp 2)" = "$want" ] || fail "$f simulates differently"
done

# The default format is compute_only; a bad one is refused, as is the format alone.
"$baton" simulate --pp 2 --microbatches 2 --export-csv "$tmp/d.csv" > /dev/null
[ "$(cat "$tmp/d.csv")" = "$(printf '0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1')" ] || fail "default: $(cat "$tmp/d.csv")"
check 'unknown CSV format "both" (expected compute_only or compute_comms)' \
  --export-csv "$tmp/x.csv" --csv-format both
check "--csv-format needs --export-csv" --csv-format compute_comms
check "--export-csv given more than once" --export-csv "$tmp/a.csv" --export-csv "$tmp/b.csv"
check "the same file" --export-csv "$tmp/a.csv" --svg "$tmp/a.csv"
[ ! -e "$tmp/x.csv" ] && [ ! -e "$tmp/a.csv" ] || fail "a refused run wrote a CSV"

# Malformed files: one line, the line and column, the rule.
printf '0F0,0B0\n1F0,1X0,1B0\n' > "$tmp/unknown.csv"
check 'line 2 (rank 1), column 2: action "1X0" has unknown kind "X"' --schedule-file "$tmp/unknown.csv"
printf '0F0,0B0\n1F0,-1B0\n' > "$tmp/stage.csv"
check 'line 2 (rank 1), column 2: action "-1B0" must start with a stage number' --schedule-file "$tmp/stage.csv"
printf '0F0,0B0\n1F0,1B0,99999999F0\n' > "$tmp/limit.csv"
check 'column 3: action "99999999F0": stage 99999999 exceeds the limit of 4194303' --schedule-file "$tmp/limit.csv"
printf '0F0,0B0,0F1,0B1\n1F0,1B0,1F1\n' > "$tmp/ragged.csv"
check 'stage 1 micro-batch 1 has 0 B, 0 I and 0 W actions; it needs one B, or one I and one W [at line 2 (rank 1), column 3: 1F1]' \
  --schedule-file "$tmp/ragged.csv"
printf '0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n' > "$tmp/deadlock.csv"
check 'deadlock: rank 0 waits at 0B0 for 1B0 on rank 1; rank 1 waits at 1F1 for 0F1 on rank 0 [at line 1 (rank 0), column 2: 0B0; line 2 (rank 1), column 1: 1F1]' \
  --schedule-file "$tmp/deadlock.csv"
printf '0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n' > "$tmp/late.csv"
check 'line 2 (rank 1), column 2: 1RECV_F0 comes after 1F0 (column 1)' --schedule-file "$tmp/late.csv"
printf '0F0,0B0\n\n1F0,1B0\n' > "$tmp/blank.csv"
check 'line 2 is empty' --schedule-file "$tmp/blank.csv"
# The wheel's Schedule1F1B order of torch 2.15 lacks 3F0 (see csv_format_test).
check 'micro-batch 8 has 0 F actions' --schedule-file "$fixtures/1f1b_p4_m8_compute_only.csv"
# Size limits: more rows than ranks may exist.
awk 'BEGIN { for (r = 0; r <= 4096; ++r) print r "F0," r "B0" }' > "$tmp/rows.csv"
check 'line 4097: more than 4096 rows' --schedule-file "$tmp/rows.csv"
echo "1 passed, 0 failed"
