"""What the reliability tests check, written once: audit logs, database invariants, replay.

The invariants (each a function that raises AssertionError with the evidence):

- :func:`check_sqlite` -- ``PRAGMA integrity_check`` is ``ok``; for every
  agent the stored byte total equals the sum of its entries' key + value
  bytes, recomputed from the bytes themselves, and never exceeds the quota.
- :func:`read_audit` -- every line of the audit log is one JSON object; only
  the very last line may be torn (no newline: a writer killed mid-line,
  whose change therefore never happened).
- :func:`replay` -- the entries the audit log says exist, key -> (category,
  bytes), applying writes, updates and imports and every kind of removal.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Audit actions that set an entry, and those that remove one.
SETS = frozenset({"write", "update", "import"})
REMOVES = frozenset({"delete", "evict", "expire", "deployer_delete"})


def gene_id(name: str) -> str:
    return "v2:" + hashlib.sha256(name.encode()).hexdigest()


@dataclass
class Audit:
    lines: list[dict[str, Any]] = field(default_factory=list)
    torn: bytes = b""  # a last line without its newline, if any


def parse_audit(raw: bytes) -> Audit:
    audit = Audit()
    body, _, tail = raw.rpartition(b"\n")
    if not raw.endswith(b"\n"):
        audit.torn = tail
    else:
        body = raw[:-1] if raw else b""
    for n, line in enumerate(body.split(b"\n") if body else [], 1):
        try:
            value = json.loads(line)
        except ValueError:
            raise AssertionError(f"audit line {n} is not JSON: {line[:200]!r}") from None
        assert isinstance(value, dict), f"audit line {n} is not an object: {line[:200]!r}"
        audit.lines.append(value)
    return audit


def read_audit(rotifer_dir: Path) -> Audit:
    path = rotifer_dir / "audit.jsonl"
    return parse_audit(path.read_bytes()) if path.exists() else Audit()


def audit_lines(rotifer_dir: Path) -> list[dict[str, Any]]:
    """The audit log's lines; a torn last line is an error here."""
    audit = read_audit(rotifer_dir)
    assert not audit.torn, f"the audit log ends in a torn line: {audit.torn[:200]!r}"
    return audit.lines


def replay(lines: Iterable[dict[str, Any]], agent: str,
           state: dict[str, tuple[str, int]] | None = None) -> dict[str, tuple[str, int]]:
    """key -> (category, bytes) after applying ``lines`` of ``agent`` to ``state``."""
    live = dict(state or {})
    for line in lines:
        if line.get("agent") != agent:
            continue
        action = line["action"]
        if action in SETS:
            live[line["key"]] = (line["category"], line["bytes"])
        elif action in REMOVES:
            live.pop(line["key"], None)
        elif action == "drop_agent":
            live.clear()
    return live


def sqlite_state(db: Path, agent: str) -> dict[str, tuple[str, int]]:
    """key -> (category, bytes) as stored, the bytes recomputed from key and value."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT key, category, length(CAST(key AS BLOB)) + length(value) "
            "FROM memory_entries WHERE agent_id = ?", (agent,)).fetchall()
    finally:
        conn.close()
    return {k: (c, n) for k, c, n in rows}


def check_sqlite(db: Path) -> dict[str, tuple[int, int]]:
    """Integrity and byte totals of every agent; returns agent -> (used, quota)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        result = conn.execute("PRAGMA integrity_check").fetchall()
        assert result == [("ok",)], f"integrity_check: {result}"
        totals: dict[str, tuple[int, int]] = {}
        for agent, used, quota in conn.execute(
                "SELECT agent_id, used_bytes, quota_bytes FROM memory_agents").fetchall():
            summed, sizes = conn.execute(
                "SELECT coalesce(sum(length(CAST(key AS BLOB)) + length(value)), 0), "
                "coalesce(sum(size), 0) FROM memory_entries WHERE agent_id = ?",
                (agent,)).fetchone()
            assert used == summed == sizes, (
                f"agent {agent!r}: used_bytes {used}, entries sum to {summed} "
                f"(size column {sizes})")
            assert used <= quota, f"agent {agent!r} uses {used} bytes of a {quota}-byte quota"
            totals[agent] = (used, quota)
        return totals
    finally:
        conn.close()


def postgres_state(url: str, agent: str) -> dict[str, tuple[str, int]]:
    """As :func:`sqlite_state`, for a PostgreSQL store."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT key, category, octet_length(convert_to(key, 'UTF8')) + octet_length(value) "
            "FROM memory_entries WHERE agent_id = %s", (agent,)).fetchall()
    return {k: (c, int(n)) for k, c, n in rows}


def check_postgres(url: str) -> dict[str, tuple[int, int]]:
    """As :func:`check_sqlite` (without the file check), for a PostgreSQL store."""
    import psycopg

    totals: dict[str, tuple[int, int]] = {}
    with psycopg.connect(url) as conn:
        for agent, used, quota in conn.execute(
                "SELECT agent_id, used_bytes, quota_bytes FROM memory_agents").fetchall():
            summed, sizes = conn.execute(
                "SELECT coalesce(sum(octet_length(convert_to(key, 'UTF8')) + "
                "octet_length(value)), 0), coalesce(sum(size), 0) FROM memory_entries "
                "WHERE agent_id = %s", (agent,)).fetchone()  # type: ignore[misc]
            assert used == summed == sizes, (
                f"agent {agent!r}: used_bytes {used}, entries sum to {summed} (size {sizes})")
            assert used <= quota, f"agent {agent!r} uses {used} bytes of a {quota}-byte quota"
            totals[agent] = (used, quota)
    return totals


def denied_lines(lines: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["action"] == "access_denied"]


# -- replay with writers that were killed -------------------------------------------

State = tuple[str, int] | None  # (category, bytes), or None: no entry


def _apply(line: dict[str, Any], state: State) -> State | bool:
    """The state after ``line``, or ``False`` if ``line`` cannot follow ``state``."""
    action = line["action"]
    if action == "import":
        return (line["category"], line["bytes"])
    if action == "write":
        return (line["category"], line["bytes"]) if state is None else False
    if action == "update":
        if state is None or state[1] != line.get("previousBytes", state[1]):
            return False
        return (line["category"], line["bytes"])
    if action in REMOVES:
        return None if state is not None and state[1] == line["bytes"] else False
    return state


def last_groups(lines: list[dict[str, Any]], actors: Iterable[str]) -> set[int]:
    """Indexes of the lines of each actor's last append (its lines with its last ``ts``):
    the change a killed writer may have logged but not committed."""
    wanted = set(actors)
    last: dict[str, str] = {}
    for line in lines:
        if line.get("actor") in wanted:
            last[line["actor"]] = line["ts"]
    return {n for n, line in enumerate(lines)
            if line.get("actor") in wanted and last.get(line["actor"]) == line["ts"]}


def check_replay(lines: list[dict[str, Any]], agent: str, stored: dict[str, tuple[str, int]],
                 maybe: Set[int] = frozenset()) -> dict[str, int]:
    """Replay the write-ahead audit log key by key against the stored entries.

    Every line not in ``maybe`` is a change that was made: it must fit the state
    the earlier lines leave (a ``write`` only of a missing key, an ``update``
    from the bytes it names, a removal of the bytes it names).  A line in
    ``maybe`` (a killed writer's last append) may or may not have been
    committed, so both outcomes are followed.  Each stored entry must then be
    one of the states its key can be in -- so no change is in the database
    without its line, and no logged change is missing from it.  Returns counts.
    """
    per_key: dict[str, list[int]] = {}
    for n, line in enumerate(lines):
        if line.get("agent") == agent and line["action"] in SETS | REMOVES:
            per_key.setdefault(line["key"], []).append(n)
    for key in stored:
        per_key.setdefault(key, [])
    for key, indexes in per_key.items():
        states: set[State] = {None}
        for n in indexes:
            line = lines[n]
            after: set[State] = set()
            for state in states:
                new = _apply(line, state)
                if new is not False:
                    after.add(new)  # type: ignore[arg-type]
            if n in maybe:
                states |= after
            else:
                assert after, (f"audit line {n} ({line['action']} {key!r}, {line['bytes']} B) "
                               f"cannot follow any state the earlier lines allow: {states}")
                states = after
        now = stored.get(key)
        assert now in states, (f"{key!r} is stored as {now} but its audit lines only allow "
                               f"{states}")
    return {"keys": len(per_key), "lines": sum(len(v) for v in per_key.values())}
