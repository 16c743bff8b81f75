#!/usr/bin/env bash
# Every relative link in README.md and docs/*.md resolves inside the
# repository, #anchors to headings included (scripts/check_links.sh); and the
# checker fails, naming each one, on a copy with broken links. The baton
# binary ($1) is not used.
source "$(dirname "$0")/lib/common.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
command -v python3 >/dev/null || { echo "skipped: no python3"; exit 77; }
out=$(bash "$root/scripts/check_links.sh" 2>&1) || fail "broken links in the docs:
$out"

# The checker itself: a tree whose README links to a missing file, a file
# outside the tree, a missing heading and a good one.
mkdir -p "$tmp/tree/scripts" "$tmp/tree/docs"
cp "$root/scripts/check_links.sh" "$tmp/tree/scripts/"
printf '# Top\n\n[a](docs/a.md#the-façade-batonpipeline) [b](docs/none.md) [c](../DESIGN.md)\n[d](docs/a.md#nope) [e](#top) `[f](docs/code.md)`\n' \
  > "$tmp/tree/README.md"
printf '# A\n\n## The façade: `baton::Pipeline`\n' > "$tmp/tree/docs/a.md"
out=$(bash "$tmp/tree/scripts/check_links.sh" 2>&1) && fail "broken links passed: $out"
for expected in "README.md:3: docs/none.md (no such file or folder)" \
                "README.md:3: ../DESIGN.md (outside the repository)" \
                "README.md:4: docs/a.md#nope (no heading with anchor #nope in docs/a.md)" \
                "3 broken of 5 relative links"; do
  printf '%s' "$out" | grep -qF -- "$expected" || fail "checker did not report '$expected': $out"
done
echo "ok"
