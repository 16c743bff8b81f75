#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j "${BATON_TEST_JOBS:-2}" --timeout 600
