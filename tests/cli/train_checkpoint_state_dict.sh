#!/usr/bin/env bash
# tools/checkpoint_state_dict.py joins a checkpoint's layer files into one
# state_dict keyed by the layers' own names, which an equivalent PyTorch
# module (an nn.Sequential of the zoo mlp's named layers) loads strictly, with
# each tensor equal to its layer file's; in Debian's torch 1.13 and the PyPI
# torch 2.x, from a dp x pp ZeRO-1 run. Skipped (77) when no Python has torch.
source "$(dirname "$0")/lib/common.sh"
torch_pythons
tool="$(dirname "$0")/../../tools/checkpoint_state_dict.py"

timeout 300 "$baton" train --model mlp --layers 4 --hidden 16 --in-features 8 --classes 3 --dp 2 --pp 2 \
  --nproc 4 --zero 1 --batch 8 --microbatches 2 --steps 2 --threads 1 --save "$tmp/ck" > "$tmp/train.out" 2>&1 \
  || fail "train: $(tail -3 "$tmp/train.out")"
names=$(python3 -c 'import json, sys; print(",".join(json.load(open(sys.argv[1]))["model"]["layer_names"]))' \
  "$tmp/ck/manifest.json") || fail "the manifest has no layer names"
[ "$names" = "linear0_relu,linear1_relu,linear2_relu,linear3" ] || fail "layer names: $names"
for p in "${pythons[@]}"; do
  "$p" "$tool" "$tmp/ck" "$tmp/state.pt" > "$tmp/tool.out" 2>&1 || fail "$p: $(tail -3 "$tmp/tool.out")"
  "$p" - "$tmp" > "$tmp/check.out" 2>&1 <<'PY' || fail "$p: $(tail -5 "$tmp/check.out")"
import collections, glob, os, sys, torch
tmp = sys.argv[1]
state = torch.load(os.path.join(tmp, "state.pt"))
# The zoo's mlp: each layer a Linear (with its ReLU but the last), named as baton names it.
model = torch.nn.Sequential(collections.OrderedDict([
    ("linear0_relu", torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())),
    ("linear1_relu", torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())),
    ("linear2_relu", torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())),
    ("linear3", torch.nn.Sequential(torch.nn.Linear(16, 3))),
]))
model.load_state_dict(state, strict=True)
step = sorted(glob.glob(os.path.join(tmp, "ck", "step_*")))[-1]
for i, name in enumerate(["linear0_relu", "linear1_relu", "linear2_relu", "linear3"]):
    layer = torch.load(os.path.join(step, f"layer_{i:05d}.pt"))
    for key, tensor in layer.items():
        assert torch.equal(model.state_dict()[f"{name}.{key}"], tensor), (name, key)
assert model(torch.randn(5, 8)).shape == (5, 3)
print("loaded", len(state), "tensors strictly with torch", torch.__version__)
PY
  cat "$tmp/check.out"
done
echo "1 passed, 0 failed"
