#!/usr/bin/env bash
# Issue 16's data-loss cases, on real folders: --save never deletes or
# changes what baton did not write, an output never overwrites an input, a
# resume cannot silently untie tied embeddings, a failed or killed save
# leaves nothing that is taken for a checkpoint, and --keep-last rotates only
# baton's own step folders. Every case fails on the code before the fix.
source "$(dirname "$0")/lib/common.sh"

# digest <folder>: every file's path and content, to prove a folder unchanged.
digest() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
quiet() { timeout 300 "$baton" train "$@" --threads 1 > "$tmp/run.out" 2>&1 || fail "$*: $(tail -3 "$tmp/run.out")"; }

# 1. A folder that is not baton's: refused, untouched.
mkdir -p "$tmp/photos/step_photos"
echo a > "$tmp/photos/step_photos/a.txt"
echo '{"mine": true}' > "$tmp/photos/manifest.json"
before=$(digest "$tmp/photos")
expect_bad_input "--save $tmp/photos is not empty and its manifest.json is not a baton checkpoint's" \
  "${T[@]}" --save "$tmp/photos"
[ "$(digest "$tmp/photos")" = "$before" ] || fail "--save changed a folder that is not baton's"
mkdir "$tmp/notes"; echo x > "$tmp/notes/notes.txt"
expect_bad_input "--save $tmp/notes is not empty and holds no baton checkpoint" "${T[@]}" --save "$tmp/notes"

# A complete checkpoint in runs/step_1000: --save runs neither deletes it nor
# writes beside it, with or without resuming from it.
mkdir -p "$tmp/runs"
quiet "${T[@]}" --save "$tmp/runs/step_1000"
before=$(digest "$tmp/runs")
expect_bad_input "--save $tmp/runs is not empty and holds no baton checkpoint" "${T[@]}" --save "$tmp/runs"
expect_bad_input "--save $tmp/runs is not empty" "${J[@]}" --hidden 16 --steps 4 \
  --resume "$tmp/runs/step_1000" --save "$tmp/runs"
[ "$(digest "$tmp/runs")" = "$before" ] || fail "--save runs changed runs/step_1000"

# Rotation: only the step folders baton's manifest lists go, the newest
# --keep-last stay (each one loadable on its own), and a user's file or
# folder inside the checkpoint folder survives every save.
quiet "${J[@]}" --hidden 16 --steps 1 --save "$tmp/ck"
echo keep > "$tmp/ck/notes.txt"
mkdir "$tmp/ck/step_mine"; echo mine > "$tmp/ck/step_mine/x"
quiet "${J[@]}" --hidden 16 --steps 4 --resume "$tmp/ck" --save "$tmp/ck" --save-every 1
# step_00000001, which this run resumed from, stays (listed, for a later run to rotate).
[ "$(ls "$tmp/ck" | tr '\n' ' ')" = "manifest.json notes.txt step_00000001 step_00000003 step_00000004 step_mine " ] \
  || fail "after 4 saves with --keep-last 2: $(ls "$tmp/ck")"
[ "$(cat "$tmp/ck/notes.txt") $(cat "$tmp/ck/step_mine/x")" = "keep mine" ] || fail "a user's file changed"
quiet "${J[@]}" --hidden 16 --steps 5 --resume "$tmp/ck/step_00000003" --keep-last 1 --save "$tmp/ck1" --metrics "$tmp/m.jsonl"
grep -q '"step":4' "$tmp/m.jsonl" || fail "resuming an older kept step folder did not start at step 4"
# --keep-last 1 with --resume of the folder it saves into: the resumed step
# folder stays, whatever the rotation says.
quiet "${J[@]}" --hidden 16 --steps 7 --resume "$tmp/ck" --save "$tmp/ck" --save-every 1 --keep-last 1
[ "$(ls "$tmp/ck" | tr '\n' ' ')" = "manifest.json notes.txt step_00000004 step_00000007 step_mine " ] \
  || fail "--keep-last 1 after resuming step 4: $(ls "$tmp/ck")"

# 2. Outputs never overwrite inputs, by identity (a hard link too).
before=$(digest "$tmp/ck")
R=("${J[@]}" --hidden 16 --steps 9)
expect_bad_input "--metrics \"$tmp/ck/manifest.json\" lies inside the --save folder" \
  "${R[@]}" --resume "$tmp/ck" --save "$tmp/ck" --metrics "$tmp/ck/manifest.json"
expect_bad_input "--metrics \"$tmp/ck/manifest.json\" lies inside the --resume folder \"$tmp/ck\", which baton reads" \
  "${R[@]}" --resume "$tmp/ck" --metrics "$tmp/ck/manifest.json"
expect_bad_input "--trace \"$tmp/ck/step_00000007/layer_00000.pt\" lies inside the --resume folder" \
  "${R[@]}" --resume "$tmp/ck" --trace "$tmp/ck/step_00000007/layer_00000.pt"
expect_bad_input "--metrics \"$tmp/ck/m.jsonl\" lies inside the --save folder \"$tmp/ck\", which baton writes" \
  "${T[@]}" --save "$tmp/ck" --metrics "$tmp/ck/m.jsonl"
[ "$(digest "$tmp/ck")" = "$before" ] || fail "a refused run changed the checkpoint"
printf 'model = "mlp"\nlayers = 4\n' > "$tmp/c.toml"
ln "$tmp/c.toml" "$tmp/hard.toml"
expect_bad_input "--config and --metrics name the same file" "${T[@]}" --config "$tmp/c.toml" --metrics "$tmp/c.toml"
expect_bad_input "--config and --profile-out name the same file" "${T[@]}" --config "$tmp/c.toml" --profile-out "$tmp/c.toml"
expect_bad_input "--config and --svg name the same file \"$tmp/hard.toml\"" "${T[@]}" --config "$tmp/c.toml" --svg "$tmp/hard.toml"
[ "$(cat "$tmp/c.toml")" = "$(printf 'model = "mlp"\nlayers = 4')" ] || fail "the config changed"
mkdir "$tmp/data"
expect_bad_input "--metrics \"$tmp/data/m.jsonl\" lies inside the --data-dir folder" \
  "${T[@]}" --data-dir "$tmp/data" --metrics "$tmp/data/m.jsonl"
expect_bad_input "--save \"$tmp/ck/inner\" lies inside the --resume folder" \
  "${R[@]}" --resume "$tmp/ck" --save "$tmp/ck/inner"
[ -e "$tmp/ck/inner" ] && fail "a refused --save made its folder"

# 3. An untied checkpoint resumed with --tie-embeddings (and back) is refused.
G=(--model gpt --layers 2 --hidden 32 --heads 4 --context 16 --microbatches 2 --batch 8 --pp 1)
quiet "${G[@]}" --steps 1 --save "$tmp/untied"
expect_bad_input "was saved with --tie-embeddings false but this run has --tie-embeddings true" \
  "${G[@]}" --steps 2 --resume "$tmp/untied" --tie-embeddings --save "$tmp/untied"
quiet "${G[@]}" --steps 1 --save "$tmp/tied" --tie-embeddings
expect_bad_input "was saved with --tie-embeddings true but this run has --tie-embeddings false" \
  "${G[@]}" --steps 2 --resume "$tmp/tied"

# 4. A failed save (a file size limit, as a full disk) and a killed one leave
# no step folder that is taken for a checkpoint, and the next save clears
# what they left. The model is wide enough that its layer files exceed 64 KiB.
W=(--model mlp --layers 4 --hidden 256 --batch 8 --microbatches 2 --pp 2 --nproc 2)
quiet "${W[@]}" --steps 1 --save "$tmp/full"
before=$(digest "$tmp/full")
# Gloo, not shared memory: the limit would refuse the shm rings' files first.
(trap '' XFSZ; ulimit -f 64; timeout 300 "$baton" train "${W[@]}" --threads 1 --transport gloo --steps 2 --resume "$tmp/full" \
  --save "$tmp/full" > "$tmp/full.out" 2>&1) && fail "a save over the file size limit exited 0"
grep -q "cannot write" "$tmp/full.out" || fail "the failed save did not say why: $(tail -3 "$tmp/full.out")"
[ "$(digest "$tmp/full")" = "$before" ] || [ -n "$(ls -d "$tmp"/full/*.partial 2>/dev/null)" ] \
  || fail "the failed save changed the checkpoint"
ls -d "$tmp"/full/step_00000002 2>/dev/null && fail "the failed save left a step folder"
python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["step"] == 1' "$tmp/full/manifest.json" \
  || fail "the manifest is not step 1's after the failed save"
BATON_TEST_KILL_IN_SAVE=1:2 timeout 300 "$baton" train "${W[@]}" --threads 1 --steps 2 --resume "$tmp/full" \
  --save "$tmp/full" > "$tmp/kill.out" 2>&1 && fail "the killed save exited 0"
ls -d "$tmp"/full/step_00000002.partial > /dev/null || fail "the killed save left no partial folder (hook?)"
quiet "${W[@]}" --steps 2 --resume "$tmp/full" --save "$tmp/full"
[ "$(ls "$tmp/full" | tr '\n' ' ')" = "manifest.json step_00000001 step_00000002 " ] \
  || fail "after a save that followed a killed one: $(ls "$tmp/full")"
echo "ok"
