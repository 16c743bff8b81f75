#!/usr/bin/env bash
# Issue 7.11 for --cache-dir: a cache given explicitly was not keyed by its
# data folder, so a cache filled from one --data-dir was read for another.
# Each data folder now has its own folder under the --cache-dir root.
source "$(dirname "$0")/lib/common.sh"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || { echo "apt-get install dataset-fashion-mnist; skipped"; exit 77; }
cnn=(--model cnn --pp 1 --nproc 1 --steps 1 --batch 8 --microbatches 2 --threads 1 --cache-dir "$tmp/c")
"$baton" train "${cnn[@]}" >/dev/null 2>"$tmp/err" || fail "cnn on the Debian data: $(cat "$tmp/err")"
[ -f "$tmp/c/fashion-mnist/train-images-idx3-ubyte" ] || fail "no keyed cache: $(ls -R "$tmp/c")"
# An empty data folder does not borrow the Debian data's cache.
mkdir "$tmp/empty"
expect_bad_input "$tmp/empty/train-images-idx3-ubyte.gz not found" "${cnn[@]}" --data-dir "$tmp/empty"
# A copy of the data is decompressed into its own folder of the same root.
mkdir "$tmp/copy" && ln -s "$src"/*.gz "$tmp/copy/"
"$baton" train "${cnn[@]}" --data-dir "$tmp/copy" >/dev/null 2>"$tmp/err" || fail "copy: $(cat "$tmp/err")"
ls "$tmp"/c/fashion-mnist-*/train-images-idx3-ubyte >/dev/null 2>&1 || fail "no cache of its own: $(ls "$tmp/c")"
echo "1 passed, 0 failed"
