"""``agent export`` never replaces a file silently: an existing FILE is refused
(nothing written, no audit line) unless ``--force`` is given.  And ``audit
verify`` counts in English ("1 entry").  In process (helpers.run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import audit, last_line, ok, refused
from .test_transfer_cli import make_project


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "proj")
    ok(root, "agent", "create", "bot", "--genes", "memo")
    ok(root, "agent", "run", "bot", "--input",
       json.dumps({"writes": [["memo/pref", "tabs", "PREFERENCE"]]}))
    return root


def test_export_refuses_an_existing_file_unless_forced(proj: Path, tmp_path: Path) -> None:
    file = tmp_path / "precious.txt"
    file.write_text("someone's work\n")
    before = len(audit(proj))
    line = last_line(refused(proj, "MEMORY_INVALID_INPUT", "agent", "export", "bot", str(file)))
    assert str(file) in line and "--force" in line, line
    assert file.read_text() == "someone's work\n"
    assert len(audit(proj)) == before  # no export line for an export that did not happen
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    out = ok(proj, "agent", "export", "bot", str(file), "--force")
    assert "Exported agent 'bot': 1 entry" in out
    assert json.loads(file.read_text())["agent"] == "bot"
    refused(proj, "MEMORY_INVALID_INPUT", "agent", "export", "bot", str(file))  # still no overwrite


def test_verify_says_1_entry(proj: Path) -> None:
    out = ok(proj, "agent", "audit", "verify", "bot")
    assert "1 entry agree" in out or "1 entry agrees" in out, out
    assert "1 entries" not in out
    ok(proj, "agent", "run", "bot", "--input",
       json.dumps({"writes": [["memo/two", "x", "CONTEXT"]]}))
    assert "2 entries agree" in ok(proj, "agent", "audit", "verify", "bot")
