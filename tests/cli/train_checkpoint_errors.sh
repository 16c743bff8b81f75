#!/usr/bin/env bash
# A missing, truncated or mismatched checkpoint, and bad --save/--resume
# flags, get one line naming the file and the mismatch, and exit 2, before
# any rank starts.
source "$(dirname "$0")/lib/common.sh"

timeout 300 "$baton" train "${T[@]}" --threads 1 --save "$tmp/ck" > "$tmp/save.out" 2>&1 \
  || fail "save run: $(tail -3 "$tmp/save.out")"
R=("${J[@]}" --hidden 16)  # T without --steps
copy() { rm -rf "$tmp/$1"; cp -r "$tmp/ck" "$tmp/$1"; }

expect_bad_input "folder $tmp/none does not exist" "${R[@]}" --steps 4 --resume "$tmp/none"
mkdir "$tmp/empty"
expect_bad_input "$tmp/empty/manifest.json is missing" "${R[@]}" --steps 4 --resume "$tmp/empty"

copy truncated_manifest
head -c 100 "$tmp/ck/manifest.json" > "$tmp/truncated_manifest/manifest.json"
expect_bad_input "truncated_manifest/manifest.json is not valid JSON" "${R[@]}" --steps 4 --resume "$tmp/truncated_manifest"

copy truncated
f=$(ls "$tmp/truncated"/step_*/layer_00001.pt)
head -c 200 "$tmp/ck/${f#$tmp/truncated/}" > "$f"
expect_bad_input "file $f has 200 bytes but" "${R[@]}" --steps 4 --resume "$tmp/truncated"

copy missing
f=$(ls "$tmp/missing"/step_*/layer_00002.optim.pt)
rm "$f"
expect_bad_input "file $f is missing" "${R[@]}" --steps 4 --resume "$tmp/missing"

expect_bad_input "was saved with --hidden 16 but this run has --hidden 32" \
  "${J[@]}" --hidden 32 --steps 4 --resume "$tmp/ck"
expect_bad_input "was saved with --layers 4 but this run has --layers 6" \
  --model mlp --layers 6 --hidden 16 --batch 8 --microbatches 2 --pp 2 --nproc 2 --steps 4 --resume "$tmp/ck"
expect_bad_input "holds the state of optimizer adam but this run has --optimizer sgd" \
  "${R[@]}" --optimizer sgd --steps 4 --resume "$tmp/ck"
expect_bad_input "is at step 2, not below --steps 2" "${T[@]}" --resume "$tmp/ck"

expect_bad_input "--save-every 2 needs --save DIR" "${T[@]}" --save-every 2
touch "$tmp/file"
expect_bad_input "--save $tmp/file is a file" "${T[@]}" --save "$tmp/file"
expect_bad_input "folder $tmp/no/such does not exist" "${T[@]}" --save "$tmp/no/such/ck"

copy no_crc
python3 - "$tmp/no_crc/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["files"][0]["crc32"] = "xyz"; json.dump(m, open(sys.argv[1], "w"))
PY
expect_bad_input "no_crc/manifest.json gives file" "${R[@]}" --steps 4 --resume "$tmp/no_crc"

# A corrupt file of the right size passes the launcher's checks; the rank
# names it from its CRC-32 before LibTorch's parser reads it (that parser
# reads freed memory on a zeroed file under LibTorch 1.13).
resume_fails() {  # resume_fails <folder> <expected text>
  local err
  err=$(timeout 120 "$baton" train "${R[@]}" --threads 1 --steps 4 --resume "$1" 2>&1 >/dev/null) \
    && fail "a corrupt file in $1 was loaded"
  printf '%s' "$err" | grep -qF -- "$2" || fail "$1: $err"
}
copy corrupt
f=$(ls "$tmp/corrupt"/step_*/layer_00000.pt)
size=$(stat -c %s "$f")
head -c "$size" /dev/zero > "$f"
resume_fails "$tmp/corrupt" "file $f ($size bytes) is corrupt: its CRC-32 is"

# A valid tensor file of the same size and shapes, put in another's place
# (layers 1 and 2 of this MLP are both 16x16), loaded the wrong weights
# silently before files carried checksums.
copy swapped
a=$(ls "$tmp/swapped"/step_*/layer_00001.pt); b=$(ls "$tmp/swapped"/step_*/layer_00002.pt)
[ "$(stat -c %s "$a")" = "$(stat -c %s "$b")" ] || fail "layers 1 and 2 differ in size; the test needs equal ones"
cp "$b" "$a"
resume_fails "$tmp/swapped" "file $a ($(stat -c %s "$a") bytes) is corrupt: its CRC-32 is $(python3 -c "import zlib,sys; print(f'{zlib.crc32(open(sys.argv[1],\"rb\").read()):08x}')" "$a")"
echo "ok"
