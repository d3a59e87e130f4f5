"""The history an export carries, imported into another project (issue 36, item 6):
into a project whose memory is on the real PostgreSQL of tests/pg_plugin.py, and an
import that fails after it was read (nothing of it stays in the importing project's
log); and a move's destination project, whose log gets none of the move's lines
(they go to the log of the project that keeps the agent's spec)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .helpers import audit, ok, refused
from .test_transfer_cli import WRITES, make_project

PG = pytest.mark.postgres


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """A project with agent ``bot`` and its four writes (changes 1 to 4)."""
    root = make_project(tmp_path / "proj")
    ok(root, "agent", "create", "bot", "--genes", "memo", "--memory-quota", "4KB")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES}))
    ok(root, "agent", "export", "bot", "bot.json", "-q")
    return root


def shown(root: Path) -> list[dict[str, Any]]:
    """``audit show --json``, oldest first."""
    out = ok(root, "agent", "audit", "show", "bot", "--json")
    return [json.loads(x) for x in reversed(out.splitlines())]


def use_store(root: Path, url: str) -> None:
    """Make ``url`` the project's memory store (``memoryUrl`` in its config)."""
    config = root / ".rotifer" / "config.json"
    doc = json.loads(config.read_text()) if config.exists() else {}
    doc["memoryUrl"] = url
    config.write_text(json.dumps(doc))


@PG
def test_the_history_goes_on_in_a_project_on_postgres(proj: Path, tmp_path: Path,
                                                      pg_fresh_url: str) -> None:
    """PostgreSQL keeps a change's lines in the database too, and ``audit show``
    reads them there: the carried history must be found as on SQLite."""
    other = make_project(tmp_path / "other")
    use_store(other, pg_fresh_url)
    ok(other, "agent", "import", str(proj / "bot.json"), "-q")
    history = shown(other)
    source = shown(proj)
    assert [(x["action"], x["seq"]) for x in history if x["action"] == "write"] == \
        [(x["action"], x["seq"]) for x in source if x["action"] == "write"] == \
        [("write", 1), ("write", 2), ("write", 3), ("write", 4)]
    assert [x["action"] for x in history][4:6] == ["import_agent", "import"]
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")
    # and it goes on: a run's change is the next one
    ok(other, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES[:1]}))
    assert shown(other)[-1]["action"] == "update"
    assert shown(other)[-1]["seq"] == history[-1]["seq"] + 1
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")


def test_a_failed_import_leaves_no_history_behind(proj: Path, tmp_path: Path) -> None:
    """An import refused after the file was read (the quota it is given does not
    hold the entries) appends nothing to the importing project's log; the retry
    that succeeds carries the history once."""
    other = make_project(tmp_path / "other")
    refused(other, "MEMORY_QUOTA_EXCEEDED", "agent", "import", str(proj / "bot.json"),
            "--memory-quota", "0.01KB", "-q")
    assert [x for x in audit(other) if x.get("agent") == "bot"] == []
    ok(other, "agent", "import", str(proj / "bot.json"), "-q")
    writes = [x["seq"] for x in shown(other) if x["action"] == "write"]
    assert writes == [1, 2, 3, 4]  # once, not twice
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")


def test_a_moves_destination_project_gets_no_lines(proj: Path, tmp_path: Path) -> None:
    """The move's lines, at both ends, go to the log of the project that keeps the
    agent's spec (whose later runs log there too): the destination project does
    not know the agent, and its log gets nothing; the source's shows the move and
    the import, and verifies."""
    other = make_project(tmp_path / "other")
    before = len(audit(other))
    ok(proj, "agent", "move", "bot", "--to",
       f"sqlite:{other / '.rotifer' / 'playground.db'}", "-q")
    assert len(audit(other)) == before
    actions = [x["action"] for x in shown(proj)]
    assert "move" in actions and actions.index("import_agent") > actions.index("move")
    assert "OK agent 'bot'" in ok(proj, "agent", "audit", "verify", "bot")
    # To belong to the other project, the agent is exported there and imported.
    ok(proj, "agent", "export", "bot", str(tmp_path / "moved.json"), "-q")
    ok(proj, "agent", "delete", "bot", "--yes")
    ok(other, "agent", "import", str(tmp_path / "moved.json"), "-q")
    assert [x["seq"] for x in shown(other) if x["action"] == "write"] == [1, 2, 3, 4]
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")



def test_a_history_an_interrupted_import_left_is_not_carried_twice(proj: Path,
                                                                   tmp_path: Path) -> None:
    """An import killed (or whose commit failed) after it appended the history leaves
    those lines in the log; the import run again continues them instead of appending
    them a second time (which ``audit verify`` refused: change 1 after change 4)."""
    from rotifer.memory import MemoryStore

    other = make_project(tmp_path / "other")
    doc = json.loads((proj / "bot.json").read_text())
    with MemoryStore.open(other / ".rotifer") as store:  # what the cut-off import wrote
        store.audit.write([{k: v for k, v in x.items() if k != "prev"}
                           for x in doc["history"]])
    ok(other, "agent", "import", str(proj / "bot.json"), "-q")
    assert [x["seq"] for x in audit(other) if x["action"] == "write"] == [1, 2, 3, 4]
    assert [x["seq"] for x in shown(other) if x["action"] == "write"] == [1, 2, 3, 4]
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")
