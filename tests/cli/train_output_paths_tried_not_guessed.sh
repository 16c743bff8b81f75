#!/usr/bin/env bash
# Issue 7.12 for train: output paths were checked with access(W_OK), which
# root passes for `--trace /proc/x`, so the run failed only at its end. Each
# path is now tried (created and removed), as simulate does, and an output
# may not overwrite the --schedule-file or --text it reads.
source "$(dirname "$0")/lib/common.sh"
for flag in --trace --svg --metrics; do
  expect_bad_input "[train] $flag \"/proc/x\" cannot be created" "${T[@]}" $flag /proc/x
done
printf 'it was a dark and stormy night\n' > "$tmp/corpus.txt"
expect_bad_input "--text and --metrics name the same file" \
  --model gpt --layers 2 --hidden 16 --heads 2 --context 8 --batch 4 --microbatches 2 --steps 1 \
  --pp 1 --nproc 1 --text "$tmp/corpus.txt" --metrics "$tmp/corpus.txt"
grep -q stormy "$tmp/corpus.txt" || fail "the corpus was overwritten"
[ "$(ls "$tmp")" = corpus.txt ] || fail "the checks left files behind: $(ls "$tmp")"
echo "1 passed, 0 failed"
