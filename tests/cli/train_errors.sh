#!/usr/bin/env bash
# Bad input to `baton train`: each gives one clear line naming the problem and
# exit code 2, quickly, without starting ranks that hang.
set -u
baton=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

check() {  # check "<expected text>" args...
  local expected=$1; shift
  local err rc
  err=$(timeout 120 "$baton" train "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "'$*' exit $rc (expected 2): $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "'$*' printed more than one line: $err"
  printf '%s' "$err" | grep -qF -- "$expected" || fail "'$*' said: $err (expected: $expected)"
}

small="--model mlp --layers 4 --hidden 8 --in-features 8 --steps 1"
check "batch of 2 samples cannot make 4 micro-batches" $small --batch 2 --microbatches 4 --pp 2 --nproc 2
check "makes 4 stages but model mlp has only 2 layers" --model mlp --layers 2 --pp 4 --nproc 4 --steps 1
check "pp=2 needs 2 ranks but --nproc is 3" $small --pp 2 --nproc 3
check "unknown schedule \"fancy\"" $small --schedule fancy
check "unknown model \"resnet50\" (expected mlp, cnn, gpt, llama or resnet)" --model resnet50
check "unknown optimizer \"lbfgs\"" $small --optimizer lbfgs
check "unknown transport \"carrier-pigeon\" (expected auto, shm or gloo)" $small --transport carrier-pigeon
check "unknown recompute mode \"sometimes\"" $small --pp 1 --nproc 1 --recompute sometimes
check "sums to 2 layers but the model has 4" $small --pp 2 --nproc 2 --balance 1,1
check "data folder $tmp/none does not exist; name the folder of the .gz files" --model cnn --pp 1 --nproc 1 --data-dir "$tmp/none" --cache-dir "$tmp/cache"
check "needs m >= 2p" $small --pp 2 --nproc 2 --schedule zb-h2 --microbatches 3 --batch 8

printf 'model = "mlp"\npp = = 2\n' > "$tmp/bad.toml"
check "malformed TOML" --config "$tmp/bad.toml"
printf 'model = "mlp"\nlayerz = 3\n' > "$tmp/unknown.toml"
check "unknown key \"layerz\"" --config "$tmp/unknown.toml"
printf 'model = "mlp"\npp = "two"\n' > "$tmp/type.toml"
check "key \"pp\" must be an integer" --config "$tmp/type.toml"
check "The following argument was not expected: --bogus" --bogus

# Under torchrun's variables, a world size that is not dp * pp fails on the rank.
err=$(RANK=0 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=29999 timeout 60 "$baton" train $small --pp 2 2>&1); rc=$?
[ $rc -ne 0 ] || fail "world size 3 with pp=2 exited 0"
printf '%s' "$err" | grep -qF "world size 3 does not equal dp=1 x pp=2" || fail "world size message: $err"
echo "1 passed, 0 failed"
