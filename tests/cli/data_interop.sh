#!/usr/bin/env bash
# Issue 34's interop with the Python side (tests/interop/check_interop.py):
# megatron-core's IndexedDatasetBuilder output read by baton token for
# token, baton's datasets read by megatron-core's IndexedDataset, and a
# SentencePiece model baton trains encoding the ids the Python package does.
# Needs a Python that imports torch and numpy (Debian's torch 1.13 serves,
# as does the PyPI wheel of scripts/test_torch2.sh); megatron-core (its source,
# loaded on its own) and sentencepiece are installed with pip into a folder
# of the build, not into the environment. Skips (77) only when pip cannot
# install them.
source "$(dirname "$0")/lib/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
site=$(cd "$(dirname "$baton")" && pwd)/interop-packages
# sentencepiece 0.2.1: the last to break ties as the C++ library baton links (check_interop.py).
packages=(sentencepiece==0.2.1 megatron-core==0.16.1)

py=""
for p in "$(command -v python3)" /usr/bin/python3; do
  [ -x "$p" ] && "$p" -c 'import torch, numpy' 2>/dev/null && { py=$p; break; }
done
[ -n "$py" ] || { echo "skipped: no Python here imports torch and numpy"; exit 77; }
installed() {
  PYTHONPATH=$site "$py" -c 'import sentencepiece; assert sentencepiece.__version__ == "0.2.1"' \
    2>/dev/null && [ -f "$site/megatron/core/datasets/indexed_dataset.py" ]
}
if ! installed; then
  for pip in "$py" "$(command -v python3)"; do
    timeout 600 "$pip" -m pip install -q --no-deps --upgrade --target "$site" "${packages[@]}" \
      > "$tmp/pip.log" 2>&1 && break
  done
  installed || { echo "skipped: pip could not install ${packages[*]}: $(tail -1 "$tmp/pip.log")"; exit 77; }
fi
PYTHONPATH=$site "$py" "$root/tests/interop/check_interop.py" "$baton" "$tmp" \
  || fail "tests/interop/check_interop.py with $py"
