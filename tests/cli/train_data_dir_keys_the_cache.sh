#!/usr/bin/env bash
# Issue 7.11: --data-dir was ignored once a cache existed: a --data-dir that
# does not exist trained on ~/.cache/baton/fashion-mnist. A given data folder
# must exist, and each data folder has its own cache.
source "$(dirname "$0")/lib/common.sh"
src=/usr/share/datasets/fashion-mnist
[ -f "$src/train-images-idx3-ubyte.gz" ] || { echo "apt-get install dataset-fashion-mnist; skipped"; exit 77; }
export XDG_CACHE_HOME="$tmp/xdg"
cnn=(--model cnn --pp 1 --nproc 1 --steps 1 --batch 8 --microbatches 2 --threads 1)
"$baton" train "${cnn[@]}" >/dev/null 2>"$tmp/err" || fail "cnn on the Debian data: $(cat "$tmp/err")"
[ -f "$tmp/xdg/baton/fashion-mnist/train-images-idx3-ubyte" ] || fail "no default cache: $(ls -R "$tmp/xdg")"
expect_bad_input "data folder $tmp/none does not exist" "${cnn[@]}" --data-dir "$tmp/none"
# A copy of the data in another folder is decompressed into its own cache.
mkdir "$tmp/copy" && ln -s "$src"/*.gz "$tmp/copy/"
"$baton" train "${cnn[@]}" --data-dir "$tmp/copy" >/dev/null 2>"$tmp/err" || fail "copy: $(cat "$tmp/err")"
ls -d "$tmp"/xdg/baton/fashion-mnist-* >/dev/null 2>&1 || fail "no cache of its own: $(ls "$tmp/xdg/baton")"
# An empty data folder does not borrow another folder's cache.
mkdir "$tmp/empty"
expect_bad_input "$tmp/empty/train-images-idx3-ubyte.gz not found" "${cnn[@]}" --data-dir "$tmp/empty"
echo "1 passed, 0 failed"
