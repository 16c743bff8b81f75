# Loads every file a baton checkpoint's manifest names with torch.load and
# checks each tensor's shape and dtype, and each file's size and CRC-32
# (Python's zlib), against the manifest. Exits 77 when
# this Python has no torch. Usage: load_checkpoint.py DIR
import json
import os
import sys
import zlib

try:
    import torch
except ImportError:
    print("skipped: no torch importable by", sys.executable)
    sys.exit(77)

root = sys.argv[1]
manifest = json.load(open(os.path.join(root, "manifest.json")))
kinds = set()
for entry in manifest["files"]:
    path = os.path.join(root, entry["path"])
    data = open(path, "rb").read()
    assert len(data) == entry["bytes"], (path, len(data), entry["bytes"])
    assert entry["crc32"] == f"{zlib.crc32(data):08x}", (path, entry["crc32"], f"{zlib.crc32(data):08x}")
    value = torch.load(path)
    tensors = value if isinstance(value, dict) else {"": value}
    assert set(tensors) == set(entry["tensors"]), (path, sorted(tensors), sorted(entry["tensors"]))
    for name, tensor in tensors.items():
        want = entry["tensors"][name]
        assert list(tensor.shape) == want["shape"], (path, name, tensor.shape, want)
        assert str(tensor.dtype) == "torch." + want["dtype"], (path, name, tensor.dtype, want)
    kinds.add(entry["kind"])
layers = sorted(e["layer"] for e in manifest["files"] if e["kind"] == "layer")
assert layers == list(range(manifest["model"]["layers"])), layers
assert kinds == {"layer", "optimizer", "rng"}, kinds
print("loaded", len(manifest["files"]), "files with torch", torch.__version__)
