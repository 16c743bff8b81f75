#!/usr/bin/env bash
# Checks every relative link in README.md and docs/*.md (or in the markdown
# files given as arguments): the file or folder it names must exist inside the
# repository, and a #anchor must name a heading of the markdown file it points
# to (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens,
# -1, -2, ... for repeats). Links in code blocks and code spans are not links.
# Prints one line per broken link, "file:line: target (why)", and exits 1 if
# there is any; web links (http:, https:, mailto:) are not checked.
#
#   bash scripts/check_links.sh [FILE.md ...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ $# -eq 0 ]; then
  set -- README.md docs/*.md
fi
exec python3 - "$root" "$@" <<'PYTHON'
import os
import re
import sys

root = os.path.realpath(sys.argv[1])
files = sys.argv[2:]

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
WEB = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def lines_outside_code(path):
    """(line number, text) of every line outside fenced code blocks."""
    inside = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                yield number, line.rstrip("\n")


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link: its text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


anchors_of = {}


def anchors(path):
    if path not in anchors_of:
        seen = {}
        found = set()
        for _, line in lines_outside_code(path):
            m = HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        anchors_of[path] = found
    return anchors_of[path]


def problem(source, target):
    """Why `target`, linked from the file `source`, does not resolve (None if it does)."""
    path, _, anchor = target.partition("#")
    if path.startswith("/"):
        return "an absolute path; link relative to the file"
    if path:
        resolved = os.path.realpath(os.path.join(os.path.dirname(source), path))
        if os.path.commonpath([resolved, root]) != root:
            return "outside the repository"
        if not os.path.exists(resolved):
            return "no such file or folder"
    else:
        resolved = os.path.realpath(source)
    if anchor:
        if not resolved.endswith(".md") or not os.path.isfile(resolved):
            return f"#{anchor} points into a file that is not markdown"
        if anchor not in anchors(resolved):
            return f"no heading with anchor #{anchor} in {os.path.relpath(resolved, root)}"
    return None


broken = 0
checked = 0
for source in files:
    for number, line in lines_outside_code(source):
        text = CODE_SPAN.sub("", line)
        targets = [m.group(1) for m in INLINE_LINK.finditer(text)]
        ref = REFERENCE.match(text)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            if not target or WEB.match(target):
                continue
            checked += 1
            why = problem(source, target)
            if why:
                broken += 1
                print(f"{source}:{number}: {target} ({why})")
if broken:
    print(f"check_links: {broken} broken of {checked} relative links in {len(files)} files")
    sys.exit(1)
print(f"check_links: all {checked} relative links in {len(files)} files resolve")
PYTHON
