"""The README's list of error codes is complete (issue 36, 8): every code the
source can print besides the memory ones (``MEMORY_...``) is named there, and
the README names no code the source does not have."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "src" / "rotifer"
#: Where a code is given in the source: a class's ``code = "X"``, ``code="X"``,
#: and the CLI's ``_report("X", ...)``.
GIVEN = re.compile(r'\bcode\s*=\s*"([A-Z][A-Z_]+)"|_report\(\s*"([A-Z][A-Z_]+)"')
#: Not user-facing: the base class's placeholder.
INTERNAL = {"ROTIFER_ERROR"}


def source_codes() -> set[str]:
    codes: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        for match in GIVEN.finditer(path.read_text(encoding="utf-8")):
            codes.add(match.group(1) or match.group(2))
    return {c for c in codes if not c.startswith("MEMORY_")} - INTERNAL


def readme_codes() -> set[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("Error codes besides the memory ones"):]
    section = section[:section.index("\n## ")]
    return set(re.findall(r"`([A-Z][A-Z_]{3,})`", section)) - {"ROTIFER_DEBUG"}


def test_the_readme_lists_every_error_code() -> None:
    source = source_codes()
    assert {"NOT_CONFIRMED", "INVALID_CONFIG", "CONSOLE_ADDRESS", "INTERRUPTED"} <= source
    assert source - readme_codes() == set(), "codes missing from the README"
    assert readme_codes() - source == set(), "the README names codes the source lacks"
