"""The README is the front door and docs/ the library: every relative link resolves, the README
stays short and indexes every page, and the two commands stay where CI and readers look."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250

_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
# [text](target) and ![alt](target); the target ends at whitespace (an optional "title" follows).
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks: a `#` or `[x](y)` inside one is code."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and not line.startswith("    "):
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces → '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").replace("*", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(path.read_text("utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")  # GitHub numbers repeats
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """Every relative link in `path` that names a missing file, leaves the repository or names
    a heading its target page does not have."""
    problems = []
    for number, line in prose_lines(path.read_text("utf-8")):
        for target in _LINK.findall(_CODE_SPAN.sub("", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:, …
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{number}: {target}"
            if not resolved.is_relative_to(root):
                problems.append(f"{where} (outside the repository)")
            elif not resolved.exists():
                problems.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                problems.append(f"{where} (no heading '{anchor}' in {resolved.relative_to(root)})")
    return problems


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_checker_reports_missing_files_and_headings(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# A page\n\n## Measured (`bench --quick`, 2 cores)\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/page.md#measured-bench---quick-2-cores) [web](https://example.com)\n"
        "[gone](docs/missing.md) [bad anchor](docs/page.md#nope) [up](../elsewhere.md)\n"
        "`[in code](docs/missing.md)`\n"
        "```\n[in a fence](docs/missing.md)\n```\n"
    )
    problems = broken_links(readme, root=tmp_path)
    assert [p.split(": ", 1)[1].split(" (")[0] for p in problems] == [
        "docs/missing.md",
        "docs/page.md#nope",
        "../elsewhere.md",
    ]


def test_readme_is_a_front_door() -> None:
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines: reference material belongs in docs/<feature>.md"
    )


def test_readme_links_every_docs_page() -> None:
    text = README.read_text("utf-8")
    linked = {
        (README.parent / target.partition("#")[0]).resolve()
        for _, line in prose_lines(text)
        for target in _LINK.findall(line)
    }
    unlinked = [str(p.relative_to(ROOT)) for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert unlinked == [], "pages the README's index does not reach"


def test_every_docs_page_has_one_title() -> None:
    for page in sorted(DOCS.glob("*.md")):
        titles = [line for _, line in prose_lines(page.read_text("utf-8")) if line.startswith("# ")]
        assert len(titles) == 1 and page.read_text("utf-8").startswith("# "), page.name


def test_readme_keeps_the_two_commands() -> None:
    """`make demo` and `make test` are the README's two commands; the Makefile and .ci/run rely on them."""
    text = README.read_text("utf-8")
    commands = re.findall(r"^make (\w+)\s+# \d\. ", text, re.MULTILINE)
    assert commands == ["demo", "test"]
    makefile = (ROOT / "Makefile").read_text("utf-8")
    for target in commands:
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"Makefile has no '{target}' target"
