"""Finding an agent's last numbered line backwards in a real log file
(rotifer.memory.audit.pending): past other agents' lines, its own lines without a
number, lines longer than a read, and no further than it is told."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory.audit import AuditLog
from rotifer.memory.audit.pending import Known, earlier_line


def line(agent: str, seq: int | None, action: str = "write", **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"ts": f"2026-03-01T12:00:00.{seq or 0:06d}Z", "agent": agent,
                           "action": action, "key": "k", "category": "CONTEXT",
                           "actor": "deployer", "bytes": 1, "entryId": None, **extra}
    if seq is not None:
        out["seq"] = seq
    return out


@pytest.fixture
def log(tmp_path: Path) -> Iterator[tuple[AuditLog, Path]]:
    audit = AuditLog(tmp_path / "audit.jsonl")
    yield audit, tmp_path / "audit.jsonl"
    audit.close()


def found(path: Path, agent: str, seq: int, limit: int | None = None) -> dict[str, Any] | None:
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        kwargs = {} if limit is None else {"limit": limit}
        got = earlier_line(fd, end, agent, seq, **kwargs)
    finally:
        os.close(fd)
    return None if got is None else dict(got)


def test_the_agents_last_numbered_line_is_found_past_other_lines(
        log: tuple[AuditLog, Path]) -> None:
    audit, path = log
    audit.write([line("bot", 1), line("bot", 2)])
    # Another agent whose name holds this one's, a key naming it, a long line
    # (over a read's 64 KiB), and the agent's own line outside any change.
    audit.write([line("bot2", 7), line("x", 3, key='"agent":"bot"'),
                 line("y", 4, reason="r" * 200_000), line("bot", None, "access_denied")])
    got = found(path, "bot", 2)
    assert got is not None and (got["agent"], got["seq"]) == ("bot", 2)
    assert found(path, "bot", 3) is None  # its last numbered line is of change 2
    assert found(path, "nobody", 1) is None
    assert found(path, "bot", 2, limit=1000) is None  # further back than it may look


def test_a_rolled_back_line_is_the_agents_last_numbered_line(
        log: tuple[AuditLog, Path]) -> None:
    audit, path = log
    audit.write([line("bot", 5)])
    audit.write([line("bot", 5, "rolled_back", reason="gone")])
    audit.write([line("other", 1)])
    got = found(path, "bot", 5)
    assert got is not None and got["action"] == "rolled_back"


def test_what_the_process_wrote_itself_is_known_without_a_read(
        log: tuple[AuditLog, Path]) -> None:
    """Known answers for the agents it saw written since the last foreign append,
    and sends the search before that point for the others."""
    audit, path = log
    audit.write([line("early", 9)])
    known = Known()
    known.appending(path.stat().st_size, True)
    mine = [line("bot", 3), line("other", 1)]
    audit.write(mine)
    known.wrote(mine)
    fd = os.open(path, os.O_RDONLY)
    try:
        end = os.fstat(fd).st_size
        assert earlier_line(fd, end, "bot", 3, known) == mine[0]
        assert earlier_line(fd, end, "bot", 4, known) is None
        got = earlier_line(fd, end, "early", 9, known)  # searched before its lines
        assert got is not None and got["seq"] == 9
        known.appending(end, True)  # another process appended: nothing is known now
        got = earlier_line(fd, end, "bot", 3, known)
        assert got is not None and got["seq"] == 3
    finally:
        os.close(fd)
