#!/usr/bin/env bash
# Issue 7.10: --text /tmp (a folder) was an internal error (exit 3,
# basic_filebuf::underflow). It is bad input: one line, exit 2.
source "$(dirname "$0")/lib/common.sh"
gpt=(--pp 1 --nproc 1 --model gpt --layers 2 --hidden 16 --heads 2 --context 8 --batch 4 --microbatches 2 --steps 1)
expect_bad_input "the text corpus $tmp is a folder; name a text file" "${gpt[@]}" --text "$tmp"
expect_bad_input "the text corpus $tmp/none does not exist" "${gpt[@]}" --text "$tmp/none"
echo "1 passed, 0 failed"
