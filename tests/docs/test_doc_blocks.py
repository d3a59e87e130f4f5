"""Every shell block in README.md, docs/*.md and examples/*/README.md runs as
written (issue 36, 2), or says on the line before it why it is not run here
(``<!-- not-run: REASON -->``: it installs packages, serves until stopped, is a
synopsis with placeholders, or is run by another test that it names).

A runnable block is run with bash (``set -e``, each command must succeed) in
an empty folder, with this checkout's ``rotifer`` first on PATH."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.helpers import clean_env

REPO = Path(__file__).resolve().parents[2]
FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "examples").glob("*/README.md"))]
FENCE = re.compile(r"^```(sh|bash|shell|console)\s*$")
MARK = re.compile(r"^<!-- not-run: (\S.*\S) -->$")


def blocks() -> list[tuple[str, int, str | None, str]]:
    """(file, line, the not-run reason or None, the block's text) of every shell block."""
    found = []
    for path in FILES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if not FENCE.match(line):
                continue
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            mark = MARK.match(lines[i - 1]) if i else None
            found.append((str(path.relative_to(REPO)), i + 1, mark.group(1) if mark else None,
                          "\n".join(lines[i + 1:end])))
    return found


ALL = blocks()


def test_blocks_are_found_and_some_run() -> None:
    assert len(ALL) >= 6
    assert [b for b in ALL if b[2] is None], "no runnable block left: the test would not bite"


@pytest.mark.parametrize(("file", "line", "reason", "text"),
                         [b for b in ALL if b[2] is None],
                         ids=[f"{b[0]}:{b[1]}" for b in ALL if b[2] is None])
def test_runnable_block_runs_as_written(tmp_path: Path, file: str, line: int,
                                        reason: str | None, text: str) -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = clean_env({"PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")})
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", text], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, (file, line, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
