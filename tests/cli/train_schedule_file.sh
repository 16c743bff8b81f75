#!/usr/bin/env bash
# Issue 10: `baton train --schedule-file` runs a schedule from a file. A CSV
# that `baton simulate` exported from interleaved trains to the very losses of
# --schedule interleaved; a file whose ranks differ from --pp, or that
# disagrees with --microbatches, is refused before ranks start (exit 2).
source "$(dirname "$0")/lib/common.sh"

"$baton" simulate --schedule interleaved --pp 2 --microbatches 4 --export-csv "$tmp/interleaved.csv" \
  > /dev/null || fail "simulate --export-csv failed"
args=(--model mlp --layers 8 --hidden 16 --batch 8 --pp 2 --nproc 2 --steps 4 --threads 1)
timeout 300 "$baton" train "${args[@]}" --microbatches 4 --schedule interleaved --metrics "$tmp/gen.jsonl" \
  > "$tmp/gen.out" 2>&1 || fail "--schedule interleaved: $(tail -5 "$tmp/gen.out")"
# No --microbatches: the file's 4 micro-batches.
timeout 300 "$baton" train "${args[@]}" --schedule-file "$tmp/interleaved.csv" --metrics "$tmp/file.jsonl" \
  > "$tmp/file.out" 2>&1 || fail "--schedule-file: $(tail -5 "$tmp/file.out")"
grep -q "schedule file .*interleaved.csv, pp=2, stages=4, micro-batches=4" "$tmp/file.out" \
  || fail "the banner does not name the file: $(head -3 "$tmp/file.out")"
losses() { grep -o '"loss":[^,}]*' "$1"; }
[ "$(losses "$tmp/gen.jsonl" | wc -l)" -eq 5 ] || fail "no losses in the metrics: $(cat "$tmp/gen.jsonl")"
[ "$(losses "$tmp/gen.jsonl")" = "$(losses "$tmp/file.jsonl")" ] \
  || fail "losses differ: $(losses "$tmp/gen.jsonl" | tr '\n' ' ') vs $(losses "$tmp/file.jsonl" | tr '\n' ' ')"

# Refused before ranks start.
"$baton" simulate --schedule 1f1b --pp 4 --microbatches 4 --export-csv "$tmp/four.csv" > /dev/null \
  || fail "simulate --export-csv (pp 4) failed"
expect_bad_input "schedule file $tmp/four.csv has 4 ranks but pp=2" "${T[@]}" --schedule-file "$tmp/four.csv"
expect_bad_input "runs 4 micro-batches but --microbatches is 2" "${T[@]}" --schedule-file "$tmp/interleaved.csv"
expect_bad_input "--schedule-file gives the schedule; drop --schedule" "${T[@]}" \
  --schedule-file "$tmp/interleaved.csv" --schedule 1f1b
expect_bad_input "no-such.csv" "${T[@]}" --schedule-file "$tmp/no-such.csv"
echo "1 passed, 0 failed"
