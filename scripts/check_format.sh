#!/usr/bin/env bash
# Fails, naming each file, when a tracked C++ file is not as clang-format
# (.clang-format: Google style, 100 columns) would write it.
#   bash scripts/check_format.sh        # check (CI)
#   bash scripts/check_format.sh --fix  # rewrite the files in place
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check_format: clang-format is not installed (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.h' '*.cpp' '*.cu')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  echo "check_format: ${#bad[@]} file(s) differ from clang-format ($(clang-format --version | head -1)):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "run: bash scripts/check_format.sh --fix" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files formatted"
