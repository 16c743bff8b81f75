# Sourced by the CLI tests: $baton, a temporary folder, fail, and
# expect_bad_input. Not a test itself (CMake globs tests/cli/*.sh only).
set -u
baton=$1
tmp=$(mktemp -d)
pids=()
cleanup() {
  [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[@]}" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

# torch_pythons: sets `pythons` to the Pythons here that import torch, Debian's
# (/usr/bin/python3, torch 1.13) and the one on the PATH (the PyPI wheel), and
# skips the test (77) when there is none.
torch_pythons() {
  local p
  pythons=()
  for p in /usr/bin/python3 "$(command -v python3)"; do
    [ -x "$p" ] && "$p" -c 'import torch' 2>/dev/null && pythons+=("$p")
  done
  [ ${#pythons[@]} -gt 0 ] || { echo "skipped: no Python here can import torch"; exit 77; }
}

# fresh <file>...: empties the files now, in this shell. A background job's own
# `> file` runs later, in its subshell, so a poll right after the launch could
# still read the previous run's output (cli.train_error_line_whole failed so in CI).
fresh() { local f; for f in "$@"; do : > "$f"; done; }

# The small job of issue 7's reports: T; J is T without --hidden and --steps.
J=(--model mlp --layers 4 --batch 8 --microbatches 2 --pp 2 --nproc 2)
T=("${J[@]}" --hidden 16 --steps 2)

# expect_bad_input_of <command> "<expected text>" args...: `baton command
# args` prints one line holding the text on stderr and exits 2, quickly.
expect_bad_input_of() {
  local command=$1 expected=$2; shift 2
  local err rc
  err=$(timeout 120 "$baton" "$command" "$@" 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] || fail "'$*' exit $rc (expected 2): $err"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "'$*' printed more than one line: $err"
  printf '%s' "$err" | grep -qF -- "$expected" || fail "'$*' said: $err (expected: $expected)"
}

# expect_bad_input "<expected text>" args...: the same for `baton train`.
expect_bad_input() { expect_bad_input_of train "$@"; }
