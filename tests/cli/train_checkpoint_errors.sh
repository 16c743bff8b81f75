#!/usr/bin/env bash
# A missing, truncated, corrupt, swapped, incomplete, out-of-range, escaping
# or mismatched checkpoint, and bad --save/--resume flags, get one line naming
# the file and the mismatch, and exit 2, before any rank starts.
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
# The run's data and lr schedule: a resume that changes them is refused unless allowed.
M=(--model mlp --layers 4 --hidden 16 --microbatches 2 --pp 2 --nproc 2 --steps 3 --resume "$tmp/ck")
expect_bad_input "was saved with --batch 8 but this run has --batch 16; pass --allow-resume-change batch" \
  "${M[@]}" --batch 16
expect_bad_input "was saved with --seed 1 but this run has --seed 7" "${R[@]}" --steps 3 --resume "$tmp/ck" --seed 7
expect_bad_input 'was saved with --lr-schedule "constant" but this run has --lr-schedule "cosine"' \
  "${R[@]}" --steps 3 --resume "$tmp/ck" --lr-schedule cosine
expect_bad_input 'allow-resume-change names "epochs"' "${R[@]}" --steps 3 --resume "$tmp/ck" --allow-resume-change epochs
timeout 300 "$baton" train "${M[@]}" --threads 1 --batch 16 --seed 7 --allow-resume-change batch,seed \
  > "$tmp/allowed.out" 2>&1 || fail "an allowed change was refused: $(tail -3 "$tmp/allowed.out")"

expect_bad_input "--save-every 2 needs --save DIR" "${T[@]}" --save-every 2
touch "$tmp/file"
expect_bad_input "--save $tmp/file is a file" "${T[@]}" --save "$tmp/file"
expect_bad_input "folder $tmp/no/such does not exist" "${T[@]}" --save "$tmp/no/such/ck"
# Empty values (an unset variable) are refused by name, not taken as "not given".
expect_bad_input "--save was given an empty value" "${T[@]}" --save ""
expect_bad_input "--resume was given an empty value" "${T[@]}" --resume ""
printf 'save = ""\n' > "$tmp/empty_save.toml"
expect_bad_input "key \"save\" is an empty string" "${T[@]}" --config "$tmp/empty_save.toml"
# A folder that cannot be made is refused before training, not at save time.
ln -s "$tmp/nowhere/x" "$tmp/dangling"
expect_bad_input "--save $tmp/dangling is a link to $tmp/nowhere/x, which does not exist" "${T[@]}" --save "$tmp/dangling"
expect_bad_input "--save /proc/baton_ck cannot be created" "${T[@]}" --save /proc/baton_ck
expect_bad_input "--save-every: must be a whole number of at least 1, got \"abc\"" "${T[@]}" --save "$tmp/ok" --save-every abc
expect_bad_input "--keep-last: must be an integer in [1, 2147483647], got 0" "${T[@]}" --save "$tmp/ok" --keep-last 0

copy no_crc
python3 - "$tmp/no_crc/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); m["files"][0]["crc32"] = "xyz"; json.dump(m, open(sys.argv[1], "w"))
PY
expect_bad_input "no_crc/manifest.json gives file" "${R[@]}" --steps 4 --resume "$tmp/no_crc"

# A corrupt file of the right size is named from its CRC-32 before any rank
# starts (and before LibTorch's parser reads it: that parser reads freed
# memory on a zeroed file under LibTorch 1.13).
copy corrupt
f=$(ls "$tmp/corrupt"/step_*/layer_00000.pt)
size=$(stat -c %s "$f")
head -c "$size" /dev/zero > "$f"
expect_bad_input "file $f ($size bytes) is corrupt: its CRC-32 is" "${R[@]}" --steps 4 --resume "$tmp/corrupt"

# One flipped byte.
copy flipped
f=$(ls "$tmp/flipped"/step_*/layer_00003.pt)
python3 - "$f" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read()); data[len(data) // 2] ^= 0x01
open(sys.argv[1], "wb").write(data)
PY
expect_bad_input "file $f ($(stat -c %s "$f") bytes) is corrupt" "${R[@]}" --steps 4 --resume "$tmp/flipped"

# Two layer files swapped (layers 1 and 2 of this MLP are both 16x16, so the
# sizes and shapes agree): loaded the wrong weights silently before files
# carried checksums.
copy swapped
a=$(ls "$tmp/swapped"/step_*/layer_00001.pt); b=$(ls "$tmp/swapped"/step_*/layer_00002.pt)
[ "$(stat -c %s "$a")" = "$(stat -c %s "$b")" ] || fail "layers 1 and 2 differ in size; the test needs equal ones"
mv "$a" "$tmp/t.pt"; mv "$b" "$a"; mv "$tmp/t.pt" "$b"
expect_bad_input "file $a ($(stat -c %s "$a") bytes) is corrupt: its CRC-32 is $(python3 -c "import zlib,sys; print(f'{zlib.crc32(open(sys.argv[1],\"rb\").read()):08x}')" "$a")" \
  "${R[@]}" --steps 4 --resume "$tmp/swapped"

# edit <folder> <python statement on m>: rewrites the folder's manifest.
edit() {
  copy "$1"
  python3 - "$tmp/$1/manifest.json" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); exec(sys.argv[2]); open(sys.argv[1], "w").write(json.dumps(m))
PY
}
edit no_layer 'm["files"] = [f for f in m["files"] if not (f["kind"] == "layer" and f["layer"] == 2)]'
expect_bad_input "lists no file for layer 2 of the model's 4 (a layer is missing" "${R[@]}" --steps 4 --resume "$tmp/no_layer"
for step in -5 -1 1e30 9223372036854775813; do
  edit "step$step" "m['step'] = json.loads('$step')"
  expect_bad_input "\"step\" is" "${R[@]}" --steps 4 --resume "$tmp/step$step"
  expect_bad_input "it must be an integer in [0, 2147483647]" "${R[@]}" --steps 4 --resume "$tmp/step$step"
done
echo secret > "$tmp/outside.pt"
edit escape 'f = m["files"][0]; f["path"] = m["folder"] + "/../../outside.pt"'
expect_bad_input "is not a relative path inside the checkpoint's folder" "${R[@]}" --steps 4 --resume "$tmp/escape"
# A link inside the folder that leads out of it.
copy linked
f=$(ls "$tmp/linked"/step_*/layer_00000.pt)
cp "$f" "$tmp/outside_copy.pt"; rm "$f"; ln -s "$tmp/outside_copy.pt" "$f"
expect_bad_input "outside the checkpoint's folder" "${R[@]}" --steps 4 --resume "$tmp/linked"
copy manifest_folder
rm "$tmp/manifest_folder/manifest.json"; mkdir "$tmp/manifest_folder/manifest.json"
expect_bad_input "manifest_folder/manifest.json is a folder, not a checkpoint manifest" "${R[@]}" --steps 4 --resume "$tmp/manifest_folder"

echo "ok"
