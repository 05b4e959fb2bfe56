#!/usr/bin/env python3
"""The README and the pages under docs/ cannot drift from the code or from each other:
- every `readme:begin NAME` ... `readme:end NAME` region of a compiled example (and
  of a test that shows one) appears verbatim in README.md or in a docs/*.md page;
- the transfer a SQL user writes names at most five of idem's types;
- every relative link leads somewhere: `#anchor` to a heading of the same file,
  `page.md#anchor` (or `../README.md#anchor`) to an existing file and one of its
  headings, any other path to an existing file or folder;
- README.md links to every docs/*.md page."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1]).resolve()
pages = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
texts = {page: page.read_text() for page in pages}
failures = []


def name(path):
    return str(path.relative_to(root))


regions = 0
sources = sorted((root / "examples").rglob("*.cpp")) + sorted((root / "tests").rglob("*.cpp"))
for source in sources:
    text = source.read_text()
    for match in re.finditer(r"// readme:begin (\S+)\n(.*?)[ \t]*// readme:end \1\n", text, re.S):
        regions += 1
        if not any(match.group(2) in page_text for page_text in texts.values()):
            failures.append(f"{name(source)}: region '{match.group(1)}' appears in neither README.md nor docs/*.md")

# The transfer a SQL user writes (examples/transfer: open, row, mapping, transfer)
# names at most five of idem's types.
transfer = (root / "examples" / "transfer" / "main.cpp").read_text()
names = set()
for region in ("database-open", "database-row", "database-mapping", "database-transfer"):
    match = re.search(r"// readme:begin " + region + r"\n(.*?)// readme:end " + region + r"\n", transfer, re.S)
    if not match:
        failures.append(f"examples/transfer/main.cpp: no region '{region}'")
        continue
    names |= set(re.findall(r"idem::(\w+)", match.group(1)))
print(f"the documented transfer names {len(names)} idem types: {', '.join(sorted(names))}")
if len(names) > 5:
    failures.append("the documented transfer names more than five idem types")


def prose(text):
    """The lines outside fenced code blocks."""
    in_code = False
    for line in text.splitlines():
        if re.match(r" {0,3}```", line):  # a fence indented further is code, and leaves a block open
            in_code = not in_code
        elif not in_code:
            yield line


# GitHub's anchors: the heading in lower case, spaces to hyphens, other punctuation dropped.
def anchors_of(text):
    anchors = set()
    for line in prose(text):
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return anchors


anchors = {}
links = 0
linked_from_readme = set()
for page, text in texts.items():
    for line in prose(text):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: and the like
                continue
            links += 1
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                failures.append(f"{name(page)} links to {target}: there is no {path}")
                continue
            if page.name == "README.md" and page.parent == root:
                linked_from_readme.add(linked)
            if anchor:
                if linked.suffix != ".md":
                    failures.append(f"{name(page)} links to {target}: an anchor in a file that is not Markdown")
                    continue
                if linked not in anchors:
                    anchors[linked] = anchors_of(linked.read_text())
                if anchor not in anchors[linked]:
                    failures.append(f"{name(page)} links to {target}, a section {name(linked)} does not have")
for page in pages[1:]:
    if page not in linked_from_readme:
        failures.append(f"README.md does not link to {name(page)}")

for failure in failures:
    print(failure)
print(f"{regions} regions, {links} links and {len(pages)} pages checked, {len(failures)} out of date")
sys.exit(1 if failures or regions == 0 else 0)
