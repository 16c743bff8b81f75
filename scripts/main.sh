#!/usr/bin/env bash
# The main job: install what is missing, build, and run a short
# pipeline-parallel job on the bundled default. Any failure stops it with a
# non-zero exit naming the step that failed; there is no fallback.
set -euo pipefail
cd "$(dirname "$0")/.."
step=""
trap 'rc=$?; [ $rc -eq 0 ] || echo "scripts/main.sh: the step \"$step\" failed (exit $rc)" >&2' EXIT
step="install the dependencies"
bash scripts/install_deps.sh
# Only what the job runs: the CLI and the libraries under it (scripts/test.sh builds the rest).
step="build the CLI"
bash scripts/build.sh baton
mkdir -p out
step="train the Fashion-MNIST CNN on 2 pipeline stages (examples/fashion_mnist.toml)"
./build/baton train --config examples/fashion_mnist.toml --nproc 2 \
  --metrics out/metrics.jsonl --svg out/train_timeline.svg
