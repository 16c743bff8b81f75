#!/usr/bin/env python3
"""A baton checkpoint as one PyTorch state_dict.

baton saves one file per global layer (`layer_<i>.pt`, a dict of that layer's tensors, whole
whatever the dp, pp or tp that saved it). This joins them into one dict keyed as PyTorch keys a
torch.nn.Sequential of those layers: "<layer name>.<tensor name>", the layer names being the ones
the manifest records (a Sequential's child names, the zoo's "embedding", "block0", ...), and saves
it with torch.save. `model.load_state_dict(torch.load(OUT))` then loads it into an equivalent
nn.Module. Tied weights appear under each of their names, as in a tied PyTorch module.

Usage: python3 tools/checkpoint_state_dict.py CHECKPOINT_DIR OUT.pt
CHECKPOINT_DIR is a --save folder (its newest step is read) or one of its step_<N> folders.
"""
import json
import os
import sys

import torch


def state_dict(path):
    # A --save folder's manifest lists its newest step's files, a step folder's its own; both
    # give paths relative to the folder.
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    model = manifest["model"]
    names = model.get("layer_names") or [str(i) for i in range(model["layers"])]
    out = {}
    for entry in sorted((f for f in manifest["files"] if f["kind"] == "layer"), key=lambda f: f["layer"]):
        for key, tensor in torch.load(os.path.join(path, entry["path"])).items():
            out[f"{names[entry['layer']]}.{key}"] = tensor
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: checkpoint_state_dict.py CHECKPOINT_DIR OUT.pt")
    out = state_dict(sys.argv[1])
    torch.save(out, sys.argv[2])
    print(f"{len(out)} tensors -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
