#!/usr/bin/env bash
# `baton data prepare` (issue 34): text to Megatron-LM's indexed dataset with
# the byte tokenizer, a SentencePiece model it trains (--vocab) or one given
# (--tokenizer); .jsonl, whole-file and per-line documents; each bad input
# one line with exit 2; and `baton data inspect` refusing a hostile dataset.
source "$(dirname "$0")/lib/common.sh"

gpl=/usr/share/common-licenses/GPL-3
apache=/usr/share/common-licenses/Apache-2.0
[ -f "$gpl" ] && [ -f "$apache" ] || { echo "skipped: no $gpl or $apache"; exit 77; }

# read_dataset PREFIX: prints "documents tokens dtype" and each document's
# first and last id, from the bytes as megatron-core's _IndexReader reads them.
read_dataset() {
  python3 - "$1" <<'PY'
import struct, sys
idx = open(sys.argv[1] + ".idx", "rb").read()
assert idx[:9] == b"MMIDIDX\x00\x00" and struct.unpack("<Q", idx[9:17])[0] == 1
code, n, d = idx[17], *struct.unpack("<QQ", idx[18:34])
size = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 8: 2}[code]
fmt = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 8: "H"}[code]
lengths = struct.unpack(f"<{n}i", idx[34:34 + 4 * n])
pointers = struct.unpack(f"<{n}q", idx[34 + 4 * n:34 + 12 * n])
docs = struct.unpack(f"<{d}q", idx[34 + 12 * n:34 + 12 * n + 8 * d])
assert len(idx) == 34 + 12 * n + 8 * d and docs[0] == 0 and docs[-1] == n
binary = open(sys.argv[1] + ".bin", "rb").read()
assert len(binary) == sum(lengths) * size
print(d - 1, sum(lengths), code)
for length, pointer in zip(lengths, pointers):
    ids = struct.unpack(f"<{length}{fmt}", binary[pointer:pointer + length * size])
    print(ids[0], ids[-1])
PY
}

# Byte level: each file one document, its bytes then 256; uint16 (code 8).
out=$("$baton" data prepare --input "$gpl" --input "$apache" --output "$tmp/bytes" --byte-level) \
  || fail "--byte-level exit $?"
echo "$out" | grep -q "2 documents" || fail "--byte-level said: $out"
tokens=$(( $(stat -c %s "$gpl") + $(stat -c %s "$apache") + 2 ))
first=$(head -c 1 "$gpl" | od -An -tu1 | tr -d ' ')
read_dataset "$tmp/bytes" > "$tmp/bytes.txt" || fail "the byte-level dataset does not read"
[ "$(head -1 "$tmp/bytes.txt")" = "2 $tokens 8" ] || fail "byte-level header: $(head -1 "$tmp/bytes.txt")"
[ "$(sed -n 2p "$tmp/bytes.txt")" = "$first 256" ] || fail "byte-level document 0: $(sed -n 2p "$tmp/bytes.txt")"

# .jsonl: one document a line, in "text"; --doc-per-line: one a line elsewhere.
printf '{"text": "A"}\n{"text": "BC", "meta": 1}\n' > "$tmp/docs.jsonl"
printf 'x\n\nyz\n' > "$tmp/lines.txt"
"$baton" data prepare --input "$tmp/docs.jsonl" --input "$tmp/lines.txt" --doc-per-line \
  --output "$tmp/mixed" --byte-level > /dev/null || fail "jsonl exit $?"
[ "$(read_dataset "$tmp/mixed" | tr '\n' ' ')" = "4 10 8 65 256 66 256 120 256 121 256 " ] \
  || fail "jsonl and lines: $(read_dataset "$tmp/mixed" | tr '\n' ' ')"

# SentencePiece: --vocab trains PREFIX.model, --tokenizer with it writes the same dataset.
err=$("$baton" data prepare --input "$gpl" --output "$tmp/sp" --vocab 500 2>&1 >/dev/null)
rc=$?
if printf '%s' "$err" | grep -q "built without SentencePiece"; then
  [ $rc -eq 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "stub: exit $rc: $err"
  echo "SentencePiece parts skipped: this baton was built without it"
else
  [ $rc -eq 0 ] || fail "--vocab exit $rc: $err"
  [ -s "$tmp/sp.model" ] || fail "--vocab wrote no model"
  "$baton" data prepare --input "$gpl" --output "$tmp/sp2" --tokenizer "$tmp/sp.model" \
    > /dev/null || fail "--tokenizer exit $?"
  cmp -s "$tmp/sp.bin" "$tmp/sp2.bin" && cmp -s "$tmp/sp.idx" "$tmp/sp2.idx" \
    || fail "--tokenizer with the trained model wrote another dataset"
  # End of document: SentencePiece's eos, id 2.
  [ "$(read_dataset "$tmp/sp" | sed -n 2p | cut -d' ' -f2)" = 2 ] || fail "no eos after the document"
  expect_bad_input_of data "does not load as a SentencePiece model" \
    prepare --input "$gpl" --output "$tmp/x" --tokenizer "$gpl"
  expect_bad_input_of data "the model $tmp/none.model does not exist" \
    prepare --input "$gpl" --output "$tmp/x" --tokenizer "$tmp/none.model"
  expect_bad_input_of data "cannot train a vocabulary of 100000 on the input: " \
    prepare --input "$gpl" --output "$tmp/x" --vocab 100000
  # The trained model is an output too.
  expect_bad_input_of data "--input and --output name the same file \"$tmp/in.model\"" \
    prepare --input "$tmp/in.model" --output "$tmp/in" --vocab 300
fi

expect_bad_input_of data "[data.prepare] --vocab 0: a vocabulary needs at least one id" \
  prepare --input "$gpl" --output "$tmp/x" --vocab 0
expect_bad_input_of data "give one of --vocab N (train a SentencePiece model), --tokenizer MODEL or --byte-level" \
  prepare --input "$gpl" --output "$tmp/x"
expect_bad_input_of data "not several" prepare --input "$gpl" --output "$tmp/x" --vocab 9 --byte-level
expect_bad_input_of data "[data.prepare] --input $tmp/none.txt does not exist" \
  prepare --input "$tmp/none.txt" --output "$tmp/x" --byte-level
expect_bad_input_of data "[data.prepare] --input $tmp is a folder" \
  prepare --input "$tmp" --output "$tmp/x" --byte-level
: > "$tmp/empty.txt"
expect_bad_input_of data "[data.prepare] empty input: the --input file is empty" \
  prepare --input "$tmp/empty.txt" --output "$tmp/x" --byte-level
printf '\n\n' > "$tmp/blank.txt"
expect_bad_input_of data "empty input: the 2 bytes of the inputs hold no document (2 empty ones skipped)" \
  prepare --input "$tmp/blank.txt" --doc-per-line --output "$tmp/x" --byte-level
printf '{"text": "ok"}\n{"body": 1}\n' > "$tmp/bad.jsonl"
expect_bad_input_of data "$tmp/bad.jsonl line 2 has no string field \"text\"" \
  prepare --input "$tmp/bad.jsonl" --output "$tmp/x" --byte-level
[ ! -e "$tmp/x.bin" ] && [ ! -e "$tmp/x.idx" ] || fail "a refused prepare left files behind"
ls "$tmp" | grep -q tmp && fail "a refused prepare left temporary files: $(ls "$tmp")"
# An output that would overwrite an input, which stays as it was.
cp "$tmp/bytes.bin" "$tmp/keep.bin"
expect_bad_input_of data "--input and --output name the same file \"$tmp/bytes.bin\"; give each its own" \
  prepare --input "$tmp/bytes.bin" --output "$tmp/bytes" --byte-level
cmp -s "$tmp/bytes.bin" "$tmp/keep.bin" || fail "the input was overwritten"
# inspect: the checks training makes, each refusal one line naming the file, exit 2.
"$baton" data inspect --data "$tmp/bytes" --vocab 257 | grep -qF "megatron, uint16, 2 documents, $tokens tokens" \
  || fail "inspect: $("$baton" data inspect --data "$tmp/bytes" 2>&1)"
expect_bad_input_of data "[data] $tmp/bytes.bin: token id 256 at byte offset $(( ($(stat -c %s "$gpl")) * 2 ))" \
  inspect --data "$tmp/bytes" --vocab 256
cp "$tmp/bytes.idx" "$tmp/cut.idx"; head -c 1000 "$tmp/bytes.bin" > "$tmp/cut.bin"
expect_bad_input_of data "$tmp/cut.bin holds 1000 bytes, fewer than the $((tokens * 2))" inspect --data "$tmp/cut"
cp "$tmp/bytes.bin" "$tmp/magic.bin"; { printf 'X'; tail -c +2 "$tmp/bytes.idx"; } > "$tmp/magic.idx"
expect_bad_input_of data "$tmp/magic.idx starts with \"XMIDIDX\\x00\\x00\", not the magic" inspect --data "$tmp/magic"
expect_bad_input_of data "not a whole number of uint32 tokens" \
  inspect --data "$tmp/bytes.idx" --data-format flat-uint32
expect_bad_input_of data "--output given more than once" \
  prepare --input "$gpl" --output "$tmp/a" --output "$tmp/b" --byte-level
echo "1 passed, 0 failed"
