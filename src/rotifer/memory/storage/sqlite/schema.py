"""The SQLite schema, as numbered steps (``PRAGMA user_version`` records the last)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import NamedTuple

STEP_1 = """
CREATE TABLE IF NOT EXISTS memory_agents (
    agent_id TEXT PRIMARY KEY,
    quota_bytes INTEGER NOT NULL,
    max_retention_days INTEGER,
    anonymization_supported INTEGER NOT NULL,
    used_bytes INTEGER NOT NULL,
    next_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_entries (
    agent_id TEXT NOT NULL,
    key TEXT NOT NULL,
    category TEXT NOT NULL,
    value BLOB NOT NULL,
    size INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    creator_domain TEXT,
    last_accessed_by TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    read_scope TEXT NOT NULL,
    write_scope TEXT NOT NULL,
    share_policy TEXT NOT NULL,
    retention TEXT,
    expires_us INTEGER,
    seq INTEGER NOT NULL,
    UNIQUE (agent_id, key)
);
CREATE INDEX IF NOT EXISTS memory_entries_cleanup
    ON memory_entries (agent_id, category, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_recent
    ON memory_entries (agent_id, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_expiry
    ON memory_entries (agent_id, expires_us, seq) WHERE expires_us IS NOT NULL;
"""


def _step_1(conn: sqlite3.Connection) -> None:
    """The first schema.  ``IF NOT EXISTS``: files made before the version was
    recorded (``user_version`` 0) already have it."""
    for statement in STEP_1.split(";"):
        if statement.strip():
            conn.execute(statement)


def _step_2(conn: sqlite3.Connection) -> None:
    """``memory_agents.last_us``: the time of the agent's last change, so the next
    one is stamped after it whatever the clock does (see memory/engine/changes.py).
    Existing agents start from their newest entry's update time."""
    conn.execute("ALTER TABLE memory_agents ADD COLUMN last_us INTEGER NOT NULL DEFAULT 0")
    conn.execute("UPDATE memory_agents SET last_us = coalesce((SELECT max(updated_us) FROM "
                 "memory_entries e WHERE e.agent_id = memory_agents.agent_id), 0)")


def _step_3(conn: sqlite3.Connection) -> None:
    """Issue 22.  ``memory_agents.epoch``: which memory of the agent this is (its
    changes' audit lines carry it, so a move or a copy's history stays apart from
    the original's); ``head``: the hash of the last audit line of the agent's last
    committed change (the anchor ``audit verify`` checks the log against).  Agents
    made before keep ``''`` for both until their next change sets ``head``."""
    conn.execute("ALTER TABLE memory_agents ADD COLUMN epoch TEXT NOT NULL DEFAULT ''")
    conn.execute("ALTER TABLE memory_agents ADD COLUMN head TEXT NOT NULL DEFAULT ''")


STEP_4 = """
CREATE TABLE IF NOT EXISTS memory_audit_index (
    agent_id TEXT NOT NULL,
    file_no INTEGER NOT NULL,
    off INTEGER NOT NULL,
    len INTEGER NOT NULL,
    seq INTEGER,
    epoch TEXT NOT NULL,
    ts_us INTEGER NOT NULL,
    action TEXT NOT NULL,
    key_hash INTEGER,
    category TEXT,
    nbytes INTEGER NOT NULL,
    PRIMARY KEY (agent_id, file_no, off)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS memory_audit_indexed (
    agent_id TEXT PRIMARY KEY,
    epoch TEXT NOT NULL,
    simple INTEGER NOT NULL
) WITHOUT ROWID
"""


def _step_4(conn: sqlite3.Connection) -> None:
    """The history index (see :mod:`rotifer.memory.audit.index`): where each
    agent's audit lines are in the shared log, and for which agents it is whole.
    Existing agents have no marker: readers scan the log for them until
    ``audit verify`` builds their rows."""
    for statement in STEP_4.split(";"):
        if statement.strip():
            conn.execute(statement)


def _step_5(conn: sqlite3.Connection) -> None:
    """``memory_audit_index.digest``: each indexed line's SHA-256, so that
    ``audit verify`` of one agent checks its own lines and no other agent's.
    Rows made before have none: verify reads the whole log once and rebuilds."""
    conn.execute("ALTER TABLE memory_audit_index ADD COLUMN digest BLOB")


class Step(NamedTuple):
    """One step of the schema: what it runs, and what a file has once it ran."""

    run: Callable[[sqlite3.Connection], None]
    #: The table (``name``) or column (``table.column``) the step adds.
    adds: str


#: Step n takes a file from schema version n - 1 (``PRAGMA user_version``) to n:
#: the one table of the versions, read both to upgrade and to recognise what a
#: file holds.  Opening reads the version without a lock and runs DDL only when
#: a step is missing: the write lock it needs would queue behind every write in
#: progress.
STEPS: dict[int, Step] = {
    1: Step(_step_1, "memory_agents"),
    2: Step(_step_2, "memory_agents.last_us"),
    3: Step(_step_3, "memory_agents.epoch"),
    4: Step(_step_4, "memory_audit_index"),
    5: Step(_step_5, "memory_audit_index.digest"),
}
SCHEMA_VERSION = max(STEPS)


def present_version(conn: sqlite3.Connection) -> int:
    """The newest step whose table or column the file already has, whatever
    ``user_version`` says: a file recording an older version than this has a
    damaged header, and running the missing steps again would fail half-way
    ("duplicate column")."""
    for version in sorted(STEPS, reverse=True):
        table, _, column = STEPS[version].adds.partition(".")
        # table_info's rows: (cid, name, type, notnull, default, pk); none if no table.
        columns = {name for _, name, *_ in conn.execute(f"PRAGMA table_info({table})")}
        if (column in columns) if column else bool(columns):
            return version
    return 0


