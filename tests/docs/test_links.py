"""The README and docs/ link only to files in the repository: every relative
link resolves to a file that exists, none leaves the repository (a clone has
nothing beside it), and a link to a heading names a heading that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
EXTERNAL = ("http://", "https://", "mailto:")


def links(page: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", page.read_text(encoding="utf-8")))
    return LINK.findall(text)


def slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (GitHub's rule)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in HEADING.findall(text)}


def test_the_pages_are_found() -> None:
    names = [p.relative_to(ROOT).as_posix() for p in PAGES]
    assert "README.md" in names and "docs/memory.md" in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    problems: list[str] = []
    for target in links(page):
        if target.startswith(EXTERNAL):
            continue
        path, _, anchor = target.partition("#")
        if path.startswith("/"):
            problems.append(f"{target}: absolute path")
            continue
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_relative_to(ROOT):
            problems.append(f"{target}: leaves the repository")
        elif not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not problems, f"{page.relative_to(ROOT)}: {problems}"


def test_the_readme_links_the_memory_rules() -> None:
    assert "docs/memory.md" in links(ROOT / "README.md")


def test_the_slug_rule() -> None:
    assert slug("v2 ids") == "v2-ids"
    assert slug("Choosing the store: `ROTIFER_MEMORY_URL` and `memoryUrl`") == (
        "choosing-the-store-rotifer_memory_url-and-memoryurl")
    assert slug("Moving an agent") == "moving-an-agent"
