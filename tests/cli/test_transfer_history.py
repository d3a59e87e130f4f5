"""The history an export carries, imported into another project (issue 36, item 6):
into a project whose memory is on the real PostgreSQL of tests/pg_plugin.py, and an
import that fails after it was read (nothing of it stays in the importing project's
log); and a move's destination project, whose own log records the move (the
project that keeps the agent's spec logs it too, and its later changes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .helpers import audit, ok, refused, run
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


def test_a_moves_destination_project_logs_the_move(proj: Path, tmp_path: Path) -> None:
    """A move into another project's store: the source project's log keeps the move at
    both ends (its spec, binding and anchor are there), and the destination project's
    own log records it too -- the agent's history up to the move, the move and the
    import, chained in that log -- so ``audit show`` and ``audit verify`` run there
    show the move and pass; the source's verify still passes, before and after the
    agent's next change."""
    other = make_project(tmp_path / "other")
    before = len(audit(other))
    ok(proj, "agent", "move", "bot", "--to",
       f"sqlite:{other / '.rotifer' / 'playground.db'}", "-q")
    arrived = [x for x in audit(other)[before:] if x.get("agent") == "bot"]
    assert [x["action"] for x in arrived if x["action"] in ("move", "import_agent")] == \
        ["move", "import_agent"]
    source = shown(proj)
    here = shown(other)
    assert [(x["action"], x.get("seq"), x.get("epoch")) for x in here] == \
        [(x["action"], x.get("seq"), x.get("epoch")) for x in source]
    assert [x["seq"] for x in here if x["action"] == "write"] == [1, 2, 3, 4]
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")
    assert "OK agent 'bot'" in ok(proj, "agent", "audit", "verify", "bot")
    # The agent is still the source project's: its next change is logged there.
    ok(proj, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES[:1]}))
    assert shown(proj)[-1]["seq"] == source[-1]["seq"] + 1
    assert "OK agent 'bot'" in ok(proj, "agent", "audit", "verify", "bot")
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")
    assert shown(other)[-1]["seq"] == source[-1]["seq"]  # this log's history ends at the move
    # Moved away again: the destination project's log records that too, and says so.
    ok(proj, "agent", "move", "bot", "--to", f"sqlite:{proj / '.rotifer' / 'playground.db'}",
       "-q")
    done = run(other, "agent", "audit", "show", "bot")
    assert done.returncode == 0 and "move_out" in done.stdout.splitlines()[1], done
    assert "the project that keeps its spec moved it out" in done.stderr, done


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


def test_a_destination_log_edited_after_the_move_fails_verify_there(proj: Path,
                                                                    tmp_path: Path) -> None:
    """The destination project's copy of the move is chained in its log: an edited line
    there is AUDIT_MISMATCH in that project (and the source's verify is not fooled
    either way: its own log is untouched)."""
    other = make_project(tmp_path / "other")
    ok(proj, "agent", "move", "bot", "--to",
       f"sqlite:{other / '.rotifer' / 'playground.db'}", "-q")
    log = other / ".rotifer" / "audit.jsonl"
    text = log.read_text()
    assert '"action":"move"' in text
    log.write_text(text.replace('"action":"move"', '"action":"mvoe"', 1))
    refused(other, "AUDIT_MISMATCH", "agent", "audit", "verify", "bot")
    assert "OK agent 'bot'" in ok(proj, "agent", "audit", "verify", "bot")


def test_a_spec_less_memory_not_moved_in_is_still_no_agent(proj: Path, tmp_path: Path) -> None:
    """Only a memory another project moved in is shown without a spec: a memory whose
    spec was removed by hand stays AGENT_NOT_FOUND for show and verify."""
    (proj / ".rotifer" / "agents" / "bot.json").unlink()
    refused(proj, "AGENT_NOT_FOUND", "agent", "audit", "show", "bot")
    refused(proj, "AGENT_NOT_FOUND", "agent", "audit", "verify", "bot")


@PG
def test_a_move_from_postgres_into_another_projects_store_is_logged_there(
        tmp_path: Path, pg_fresh_url: str) -> None:
    """The source's history read from PostgreSQL's own copy is what the destination
    project's log gets before the move; both projects verify, and a move back to
    PostgreSQL afterwards leaves both logs intact."""
    root = make_project(tmp_path / "proj")
    use_store(root, pg_fresh_url)
    ok(root, "agent", "create", "bot", "--genes", "memo", "--memory-quota", "4KB")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES}))
    other = make_project(tmp_path / "other")
    ok(root, "agent", "move", "bot", "--to", f"sqlite:{other / '.rotifer' / 'playground.db'}",
       "-q")
    assert [x["seq"] for x in shown(other) if x["action"] == "write"] == [1, 2, 3, 4]
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")
    assert "OK agent 'bot'" in ok(root, "agent", "audit", "verify", "bot")
    ok(root, "agent", "move", "bot", "--to", pg_fresh_url, "-q")
    assert "OK agent 'bot'" in ok(root, "agent", "audit", "verify", "bot")
    assert [x["seq"] for x in shown(root) if x["action"] == "write"] == [1, 2, 3, 4]


def test_a_second_move_there_carries_only_what_came_since(proj: Path, tmp_path: Path) -> None:
    """Moved there, back, changed, and there again: the destination project's log gets
    the changes it lacks (not the whole history a second time), and verifies."""
    other = make_project(tmp_path / "other")
    there = f"sqlite:{other / '.rotifer' / 'playground.db'}"
    ok(proj, "agent", "move", "bot", "--to", there, "-q")
    ok(proj, "agent", "move", "bot", "--to", f"sqlite:{proj / '.rotifer' / 'playground.db'}",
       "-q")
    ok(proj, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES[:1]}))
    ok(proj, "agent", "move", "bot", "--to", there, "-q")
    here, source = shown(other), shown(proj)
    assert [(x["action"], x.get("seq")) for x in here if "seq" in x] == \
        [(x["action"], x.get("seq")) for x in source if "seq" in x]
    assert "OK agent 'bot'" in ok(other, "agent", "audit", "verify", "bot")
    assert "OK agent 'bot'" in ok(proj, "agent", "audit", "verify", "bot")


def _moved_home(root: Path, other: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Move ``bot`` into ``root``'s own store: (what ``other``'s log shows of it,
    oldest first; ``root``'s history of it up to that import back home)."""
    ok(root, "agent", "move", "bot", "--to", f"sqlite:{root / '.rotifer' / 'playground.db'}",
       "-q")
    source = shown(root)
    home = max(i for i, x in enumerate(source) if x["action"] == "import_agent")
    return shown(other), source[:home]


def _verified_there_and_home(other: Path, root: Path) -> None:
    """``audit verify`` passes in the project the agent moved out of (saying so)
    and in its own."""
    said = ok(other, "agent", "audit", "verify", "bot")
    assert said.startswith("OK agent 'bot'") and "its move out" in said, said
    assert "OK agent 'bot'" in ok(root, "agent", "audit", "verify", "bot")


def test_a_move_out_of_another_projects_store_is_logged_there(proj: Path,
                                                               tmp_path: Path) -> None:
    """Moved into another project's store, changed there by its own project, then
    moved out again: that project's log gets the changes it lacks and the move out,
    chained, so ``audit show`` there reads the history up to the move out (as the
    agent's own project's log has it) and ``audit verify`` there passes; the agent's
    own project verifies too."""
    other = make_project(tmp_path / "other")
    there = f"sqlite:{other / '.rotifer' / 'playground.db'}"
    ok(proj, "agent", "move", "bot", "--to", there, "-q")
    ok(proj, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES[:2]}))
    here, source = _moved_home(proj, other)
    # Everything up to the move out, not the import back home (the other project's).
    assert [(x["action"], x.get("seq"), x.get("epoch"), x.get("key")) for x in here] == \
        [(x["action"], x.get("seq"), x.get("epoch"), x.get("key")) for x in source]
    assert [x["action"] for x in here].count("write") + \
        [x["action"] for x in here].count("update") == 6  # four before, two while there
    _verified_there_and_home(other, proj)
    # The other project's log is chained: an edit there is caught there.
    log = other / ".rotifer" / "audit.jsonl"
    text = log.read_text()
    last_move = text.rindex('"action":"move"')
    log.write_text(text[:last_move] + '"action":"mvoe"' + text[last_move + 15:])
    refused(other, "AUDIT_MISMATCH", "agent", "audit", "verify", "bot")


def test_a_memory_the_project_keeps_in_another_projects_store_moved_out_is_logged_there(
        tmp_path: Path) -> None:
    """A project whose configured store is another project's ``playground.db`` (its
    agents' memories live there from the start; their changes are logged in the
    project's own log): moving an agent out writes its history and the move into
    the other project's log too, which shows and verifies it."""
    other = make_project(tmp_path / "other")
    root = make_project(tmp_path / "proj")
    use_store(root, f"sqlite:{other / '.rotifer' / 'playground.db'}")
    ok(root, "agent", "create", "bot", "--genes", "memo", "--memory-quota", "4KB")
    ok(root, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES}))
    assert [x for x in audit(other) if x.get("agent") == "bot"] == []
    here, source = _moved_home(root, other)
    assert [(x["action"], x.get("seq")) for x in here] == \
        [(x["action"], x.get("seq")) for x in source]
    _verified_there_and_home(other, root)


def test_a_move_out_an_older_rotifer_did_not_log_there_is_said_so(proj: Path,
                                                                  tmp_path: Path) -> None:
    """A log an older rotifer left: the move into this project's store is in it, the
    move out (which that rotifer logged in the agent's own project only) is not.
    ``audit show`` and ``verify`` there say where the history is, rather than
    showing the history before the move in as if it had ended there."""
    other = make_project(tmp_path / "other")
    log = other / ".rotifer" / "audit.jsonl"
    ok(proj, "agent", "move", "bot", "--to", f"sqlite:{other / '.rotifer' / 'playground.db'}",
       "-q")
    before = log.read_bytes()
    ok(proj, "agent", "move", "bot", "--to", f"sqlite:{proj / '.rotifer' / 'playground.db'}",
       "-q")
    assert log.read_bytes() != before
    log.write_bytes(before)  # as that rotifer left it
    for command in ("show", "verify"):
        err = refused(other, "AGENT_NOT_FOUND", "agent", "audit", command, "bot")
        assert "the project that keeps its spec moved it out" in err, err
    assert "OK agent 'bot'" in ok(proj, "agent", "audit", "verify", "bot")


@PG
def test_a_move_out_of_another_projects_store_to_postgres_is_logged_there(
        proj: Path, tmp_path: Path, pg_fresh_url: str) -> None:
    """Out of another project's store into PostgreSQL: that project's log records the
    move out as for any destination, and the agent's own project reads the history
    on (partly from PostgreSQL's copy of the lines)."""
    other = make_project(tmp_path / "other")
    ok(proj, "agent", "move", "bot", "--to", f"sqlite:{other / '.rotifer' / 'playground.db'}",
       "-q")
    ok(proj, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES[:1]}))
    ok(proj, "agent", "move", "bot", "--to", pg_fresh_url, "-q")
    here = shown(other)
    assert here[-1]["action"] in ("move", "move_out", "move_drop")
    said = ok(other, "agent", "audit", "verify", "bot")
    assert said.startswith("OK agent 'bot'") and "its move out" in said, said
    assert "OK agent 'bot'" in ok(proj, "agent", "audit", "verify", "bot")
    ok(proj, "agent", "run", "bot", "--input", json.dumps({"writes": WRITES[:1]}))
    assert "OK agent 'bot'" in ok(proj, "agent", "audit", "verify", "bot")
    assert [x["seq"] for x in shown(proj) if x["action"] == "write"] == [1, 2, 3, 4]
