#!/usr/bin/env bash
# Installs with apt-get whatever baton needs that this machine lacks.
# Idempotent and quiet when everything is there.
set -euo pipefail
packages=(
  cmake g++ ninja-build ccache pkg-config zlib1g-dev
  libtorch-dev libgloo-dev libopenblas0-openmp
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  libsentencepiece-dev sentencepiece
  dataset-fashion-mnist
  python3-torch
  iproute2
)
# CI's extra checks: clang's libFuzzer for scripts/fuzz.sh, clang-format for
# scripts/check_format.sh.
if [ -n "${BATON_CI:-}" ]; then packages+=(clang libclang-rt-14-dev clang-format); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
