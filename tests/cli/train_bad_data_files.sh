#!/usr/bin/env bash
# Issue 16.6: data files refused before training, each in one line naming the
# file, with exit 2. A Fashion-MNIST file with a wrong magic number was exit 3
# naming no file, and stayed in the cache; a label of 200 was exit 3 after
# training started; --text /dev/zero was read until memory ran out.
source "$(dirname "$0")/lib/common.sh"
cnn=(--model cnn --pp 1 --nproc 1 --steps 1 --batch 8 --microbatches 2 --threads 1
     --cache-dir "$tmp/cache")

# idx <dims as hex bytes> <elements> <byte at index 7 of the elements, as \ooo, or "">
idx() {
  printf '\0\0\10%b' "$1"
  if [ -n "$3" ]; then head -c 7 /dev/zero; printf "$3"; head -c $(($2 - 8)) /dev/zero
  else head -c "$2" /dev/zero; fi
}
images_train='\3\0\0\352\140\0\0\0\34\0\0\0\34'  # 3 dims: 60000 x 28 x 28
images_test='\3\0\0\47\20\0\0\0\34\0\0\0\34'     # 10000 x 28 x 28
dataset() {  # dataset <folder>: the four files, all zeros but well formed
  mkdir -p "$1"
  idx "$images_train" 47040000 "" | gzip -1 > "$1/train-images-idx3-ubyte.gz"
  idx '\1\0\0\352\140' 60000 "" | gzip -1 > "$1/train-labels-idx1-ubyte.gz"
  idx "$images_test" 7840000 "" | gzip -1 > "$1/t10k-images-idx3-ubyte.gz"
  idx '\1\0\0\47\20' 10000 "" | gzip -1 > "$1/t10k-labels-idx1-ubyte.gz"
}

dataset "$tmp/good"
"$baton" train "${cnn[@]}" --data-dir "$tmp/good" > /dev/null 2> "$tmp/err" \
  || fail "well-formed zeros: $(cat "$tmp/err")"
rm -rf "$tmp/cache"

# The magic number of the images, 0x00000803, made 0x00000903.
cp -r "$tmp/good" "$tmp/magic"
{ printf '\0\0\11'; idx "$images_train" 47040000 "" | tail -c +4; } | gzip -1 \
  > "$tmp/magic/train-images-idx3-ubyte.gz"
expect_bad_input \
  "[data.idx] $tmp/magic/train-images-idx3-ubyte.gz has the magic number 0x00000903" \
  "${cnn[@]}" --data-dir "$tmp/magic"
left=$(find "$tmp/cache" -type f 2>/dev/null)
[ -z "$left" ] || fail "a file that failed to parse was cached: $left"

# A label of 200 (octal 310) at index 7 of the training labels.
cp -r "$tmp/good" "$tmp/label"
idx '\1\0\0\352\140' 60000 '\310' | gzip -1 > "$tmp/label/train-labels-idx1-ubyte.gz"
expect_bad_input \
  "[data.idx] $tmp/label/train-labels-idx1-ubyte.gz: label 200 at index 7 is outside 0..9" \
  "${cnn[@]}" --data-dir "$tmp/label"
[ ! -e "$tmp/cache"/fashion-mnist-*/train-labels-idx1-ubyte ] || fail "the bad labels were cached"

# A given data folder that lacks the files gets no apt-get hint (issue 16.9).
mkdir "$tmp/empty"
expect_bad_input "$tmp/empty/train-images-idx3-ubyte.gz not found; the data folder needs" \
  "${cnn[@]}" --data-dir "$tmp/empty"
"$baton" train "${cnn[@]}" --data-dir "$tmp/empty" 2>&1 | grep -q apt-get \
  && fail "an explicit --data-dir got the apt-get hint"

expect_bad_input "data folder /dev/zero is a character device, not a folder" \
  "${cnn[@]}" --data-dir /dev/zero

gpt=(--pp 1 --nproc 1 --model gpt --layers 2 --hidden 16 --heads 2 --context 8 --batch 4
     --microbatches 2 --steps 1)
# Under a memory cap, so that reading without end fails fast instead of swapping;
# not under AddressSanitizer, whose shadow memory reserves terabytes of address
# space at start-up (scripts/sanitize.sh runs the CLI tests on an ASan build).
cap_memory() { ldd "$baton" 2>/dev/null | grep -q libasan || ulimit -v 8000000; }
(cap_memory
 expect_bad_input \
   "corpus /dev/zero is a character device, not a regular file; name a text file with --text" \
   "${gpt[@]}" --text /dev/zero) || exit 1
# The same for --config, which CLI11 lets through as an existing file.
(cap_memory
 expect_bad_input "--config /dev/zero is a character device, not a regular file; name a TOML file" \
   --config /dev/zero) || exit 1
echo "1 passed, 0 failed"
