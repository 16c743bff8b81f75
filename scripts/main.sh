#!/usr/bin/env bash
# The main job: install what is missing, build, and run a short
# pipeline-parallel job on the bundled default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
# Only what the job runs: the CLI and the libraries under it (scripts/test.sh builds the rest).
bash scripts/build.sh baton
mkdir -p out
if ./build/baton train --help >/dev/null 2>&1 && [ -f examples/fashion_mnist.toml ]; then
  ./build/baton train --config examples/fashion_mnist.toml --nproc 2 \
    --metrics out/metrics.jsonl --svg out/train_timeline.svg
else
  ./build/baton simulate --schedule 1f1b --pp 4 --microbatches 8 --grid --svg out/1f1b.svg
fi
