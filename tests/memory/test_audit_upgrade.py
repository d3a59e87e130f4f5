"""Databases written before issue 15 (schema version 1, or SQLite files from before
versions were recorded) are upgraded in place when opened, data kept: each
agent gets ``last_us`` from its newest entry, so its next change is stamped after
everything stored even if the clock is behind; PostgreSQL gets ``memory_audit``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from rotifer.memory import ManualClock, MemoryStore
from rotifer.memory.clock import parse_time
from rotifer.memory.storage.postgres import schema as pg_schema
from rotifer.memory.storage.sqlite import SCHEMA_VERSION as SQLITE_VERSION
from rotifer.memory.storage.sqlite import STEP_1 as SQLITE_STEP_1

from .helpers import gene_id

FUTURE = parse_time("2030-01-01T00:00:00Z")  # an entry stamped by a clock far ahead
ENTRY = ("bot", "old", "CONTEXT", b"value", 8, "v2:" + "a" * 64, "d", "v2:" + "a" * 64,
         FUTURE - 5, FUTURE, "SAME_DOMAIN", "SAME_DOMAIN", "PRIVATE", None, None, 1)


def _check_upgraded(store: MemoryStore) -> None:
    record = store.agent_record("bot")
    assert (record.used_bytes, record.next_seq, record.last_us) == (8, 2, FUTURE)
    # Issue 22: an agent made before epochs keeps epoch "" (its lines carry none)
    # and has no anchor until its next change.
    assert (record.epoch, record.head) == ("", "")
    g = store.for_gene("bot", gene_id("g"), "d")
    assert g.read_memory("old").value == b"value"  # type: ignore[union-attr]
    entry = g.write_memory("new", b"v", "CONTEXT")
    assert parse_time(entry.updated_at) == FUTURE + 1  # after the stored one, not the clock
    assert [e.key for e in g.query_memory()] == ["new", "old"]
    assert store.agent_record("bot").head != ""  # the change committed its anchor


@pytest.mark.parametrize("version", [0, 1])
def test_an_older_sqlite_file_is_upgraded_in_place(tmp_path: Path, version: int) -> None:
    db = tmp_path / "memory.db"
    conn = sqlite3.connect(db)
    with conn:
        for statement in SQLITE_STEP_1.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO memory_agents VALUES ('bot', 4096, NULL, 0, 8, 2)")
        conn.execute(f"INSERT INTO memory_entries VALUES ({', '.join('?' * 16)})", ENTRY)
        conn.execute(f"PRAGMA user_version = {version}")
    conn.close()
    clock = ManualClock("2026-01-01T00:00:00Z")
    with MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{db}", clock=clock) as store:
        _check_upgraded(store)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SQLITE_VERSION,)
    conn.close()


@pytest.mark.postgres
def test_an_older_postgres_schema_is_upgraded_in_place(pg_fresh_url: str, tmp_path: Path
                                                       ) -> None:
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        for statement in pg_schema.STEP_1.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO memory_meta VALUES ('schema_version', '1')")
        conn.execute("INSERT INTO memory_agents VALUES ('bot', 4096, NULL, false, 8, 2)")
        conn.execute(f"INSERT INTO memory_entries VALUES ({', '.join(['%s'] * 16)})", ENTRY)
    clock = ManualClock("2026-01-01T00:00:00Z")
    with MemoryStore.open(tmp_path / ".rotifer", url=pg_fresh_url, clock=clock) as store:
        _check_upgraded(store)
        with store.backend.read() as tx:
            kept = list(tx.audit_lines("bot") or [])
        assert [line["key"] for line in kept] == ["new"]
    with psycopg.connect(pg_fresh_url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM memory_meta WHERE name = 'schema_version'"
                            ).fetchone() == (str(pg_schema.SCHEMA_VERSION),)
