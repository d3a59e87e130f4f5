"""Retention and expiry, the write-ahead audit log, and storage failures."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from rotifer.memory import (
    DataPolicy,
    ErrorCode,
    GeneMemory,
    ManualClock,
    MemoryStore,
)

from .conftest import StoreFactory
from .helpers import RETAIN_1_DAY, actions, audit_lines, code_of, gene_id

A, B = gene_id("a"), gene_id("b")
DAY_US = 86_400 * 1_000_000


@pytest.fixture
def agent_quota() -> int:
    return 1000


@pytest.fixture
def g(store: MemoryStore) -> GeneMemory:
    return store.for_gene("agent", A, "d")


# -- retention -----------------------------------------------------------------

def test_expiry_is_exact_to_the_microsecond(g: GeneMemory, clock: ManualClock) -> None:
    g.write_memory("k", b"v", "CACHE", retention_policy=RETAIN_1_DAY)
    clock.advance(micros=DAY_US - 1)
    assert g.read_memory("k") is not None
    clock.advance(micros=1)
    assert g.read_memory("k") is None


def test_rewriting_restarts_the_count(g: GeneMemory, clock: ManualClock) -> None:
    g.write_memory("k", b"v", "CACHE", retention_policy=RETAIN_1_DAY)
    clock.advance(hours=23)
    g.write_memory("k", b"w", "CACHE")  # keeps its retention policy, restarts the clock
    clock.advance(hours=23)
    assert g.read_memory("k") is not None
    clock.advance(hours=1)
    assert g.read_memory("k") is None


@pytest.mark.parametrize("operation", ["read", "query", "write", "delete", "list", "usage"])
def test_expired_entries_are_purged_and_audited(store: MemoryStore, g: GeneMemory, rot: Path,
                                                clock: ManualClock, operation: str) -> None:
    g.write_memory("gone1", b"v" * 10, "CACHE", retention_policy=RETAIN_1_DAY)
    g.write_memory("gone2", b"v" * 10, "PREFERENCE", retention_policy=RETAIN_1_DAY)
    g.write_memory("stays", b"v", "CACHE")
    # Written at the same clock reading, they got consecutive microseconds (a
    # change's time strictly increases per agent), so gone2 expires 1 us later.
    clock.advance(days=1, micros=1)
    if operation == "read":
        assert g.read_memory("stays") is not None
    elif operation == "query":
        assert [e.key for e in g.query_memory()] == ["stays"]
    elif operation == "write":
        g.write_memory("other", b"v", "CACHE")
    elif operation == "delete":
        assert code_of(lambda: g.delete_memory("gone1")) is ErrorCode.NOT_FOUND
    elif operation == "list":
        assert [e.key for e in store.deployer("agent").list()] == ["stays"]
    else:
        assert store.usage("agent")[0] == len("stays") + 1
    expired = [k for a, k in actions(rot) if a == "expire"]
    assert sorted(expired) == ["gone1", "gone2"]
    # Gone for good: no longer counted, and writing the key again makes a new entry.
    clock.advance(seconds=1)
    entry = store.for_gene("agent", B, "d").write_memory("gone1", b"new", "CACHE")
    assert entry.created_by == B and entry.retention_policy is None
    assert entry.created_at == entry.updated_at
    assert [k for a, k in actions(rot) if a == "expire"] == expired  # purged once only


def test_entries_never_expire_by_default(g: GeneMemory, clock: ManualClock) -> None:
    g.write_memory("a", b"v", "CACHE")
    g.write_memory("b", b"v", "CACHE", retention_policy={**RETAIN_1_DAY, "maxRetentionDays": None})
    clock.advance(days=365 * 50)
    assert {e.key for e in g.query_memory()} == {"a", "b"}


def test_null_retention_follows_the_agent_policy(store: MemoryStore, clock: ManualClock) -> None:
    store.create_agent("short", data_policy=DataPolicy(max_retention_days=3))
    g = store.for_gene("short", A, "d")
    g.write_memory("follows", b"v", "CACHE")
    g.write_memory("own", b"v", "CACHE", retention_policy={**RETAIN_1_DAY, "maxRetentionDays": 2})
    clock.advance(days=2, micros=1)  # "own" was written 1 us after the clock's reading
    assert [e.key for e in g.query_memory()] == ["follows"]
    clock.advance(days=1)
    assert g.query_memory() == []


@pytest.mark.parametrize("days", [None, 4, 100])
def test_retention_longer_than_agent_policy_is_refused(store: MemoryStore, rot: Path,
                                                       days: int | None) -> None:
    store.create_agent("short", data_policy=DataPolicy(max_retention_days=3))
    g = store.for_gene("short", A, "d")
    ret = {**RETAIN_1_DAY, "maxRetentionDays": days}
    assert code_of(lambda: g.write_memory("k", b"v", "CACHE", retention_policy=ret)
                   ) is ErrorCode.ACCESS_DENIED
    assert g.read_memory("k") is None
    assert actions(rot)[-1] == ("access_denied", "k")
    g.write_memory("k", b"v", "CACHE", retention_policy={**RETAIN_1_DAY, "maxRetentionDays": 3})


def test_expired_entry_no_longer_counts_toward_quota(store: MemoryStore, clock: ManualClock
                                                     ) -> None:
    store.create_agent("tiny", quota_bytes=30)
    g = store.for_gene("tiny", A, "d")
    g.write_memory("pref", b"v" * 25, "PREFERENCE", retention_policy=RETAIN_1_DAY)
    assert code_of(lambda: g.write_memory("p2", b"v" * 25, "PREFERENCE")
                   ) is ErrorCode.QUOTA_EXCEEDED
    clock.advance(days=1)
    g.write_memory("p2", b"v" * 25, "PREFERENCE")
    assert store.usage("tiny")[0] == 27


# -- audit ---------------------------------------------------------------------

def test_every_change_is_audited_reads_are_not(store: MemoryStore, g: GeneMemory, rot: Path
                                               ) -> None:
    g.write_memory("k", b"v", "CACHE")
    g.write_memory("k", b"vv", "CACHE")
    g.read_memory("k")
    store.for_gene("agent", B, "d").read_memory("k")  # changes lastAccessedBy: still a read
    g.query_memory()
    g.delete_memory("k")
    g.write_memory("k", b"v", "CACHE")
    assert store.deployer("agent").delete_key("k") == 1
    lines = audit_lines(rot)
    assert [(line["action"], line["actor"]) for line in lines] == [
        ("write", A), ("update", A), ("delete", A), ("write", A), ("deployer_delete", "deployer")]
    assert all(set(line) >= {"ts", "agent", "action", "key", "category", "actor", "bytes"}
               for line in lines)
    assert [line["bytes"] for line in lines] == [2, 3, 3, 2, 2]


def break_audit(rot: Path) -> None:
    path = rot / "audit.jsonl"
    if path.exists():
        path.unlink()
    path.mkdir()  # appending to a directory fails, even for root


def test_no_audit_line_no_change(store: MemoryStore, g: GeneMemory, rot: Path) -> None:
    g.write_memory("k", b"v", "CACHE")
    g.write_memory("c", b"v", "CACHE")
    break_audit(rot)
    calls: list[Callable[[], object]] = [
        lambda: g.write_memory("k", b"changed", "CACHE"),
        lambda: g.write_memory("new", b"v", "CACHE"),
        lambda: g.delete_memory("k"),
        lambda: store.deployer("agent").delete_key("k"),
        lambda: store.deployer("agent").delete_category("CACHE"),
    ]
    for call in calls:
        assert code_of(call) is ErrorCode.STORAGE_ERROR
    (rot / "audit.jsonl").rmdir()
    assert g.read_memory("k").value == b"v"  # type: ignore[union-attr]
    assert sorted(e.key for e in g.query_memory()) == ["c", "k"]
    assert store.usage("agent")[0] == 4


def test_no_audit_line_no_eviction_or_expiry(store: MemoryStore, rot: Path,
                                             clock: ManualClock) -> None:
    store.create_agent("tiny", quota_bytes=10)
    g = store.for_gene("tiny", A, "d")
    g.write_memory("c", b"v" * 8, "CACHE", retention_policy=RETAIN_1_DAY)
    break_audit(rot)
    assert code_of(lambda: g.write_memory("d", b"v" * 8, "CACHE")) is ErrorCode.STORAGE_ERROR
    clock.advance(days=2)
    assert code_of(lambda: g.query_memory()) is ErrorCode.STORAGE_ERROR
    (rot / "audit.jsonl").rmdir()
    clock.set("2026-03-01T12:00:01Z")
    assert [e.key for e in g.query_memory()] == ["c"]


def test_audit_lines_of_two_stores_never_interleave(store_factory: StoreFactory, rot: Path,
                                                   clock: ManualClock) -> None:
    s1 = store_factory(rot, clock=clock)
    s2 = store_factory(rot, clock=clock)
    s1.create_agent("x")
    for i in range(50):
        (s1 if i % 2 else s2).for_gene("x", A, "d").write_memory(f"k{i}", b"v" * 100, "CACHE")
    lines = audit_lines(rot)
    assert [line["key"] for line in lines] == [f"k{i}" for i in range(50)]


# -- storage failures ----------------------------------------------------------

def test_corrupt_database_is_a_storage_error_not_an_empty_memory(tmp_path: Path) -> None:
    rot = tmp_path / ".rotifer"
    rot.mkdir()
    (rot / "playground.db").write_bytes(b"this is not a database" * 100)
    assert code_of(lambda: MemoryStore.open(rot)) is ErrorCode.STORAGE_ERROR
    assert (rot / "playground.db").read_bytes().startswith(b"this is not")


def test_unknown_memory_url_never_falls_back(tmp_path: Path) -> None:
    assert code_of(lambda: MemoryStore.open(tmp_path, url="mysql://x")) is ErrorCode.STORAGE_ERROR
    assert not (tmp_path / "playground.db").exists()


def test_agent_without_memory(store: MemoryStore) -> None:
    assert code_of(lambda: store.for_gene("nobody", A, "d")) is ErrorCode.STORAGE_ERROR
    assert code_of(lambda: store.create_agent("agent")) is ErrorCode.INVALID_INPUT
    for quota in [0, -1, True, 1.5]:
        assert code_of(lambda: store.create_agent("q", quota_bytes=quota)  # type: ignore[arg-type]  # noqa: B023
                       ) is ErrorCode.INVALID_INPUT


def test_store_closed_underneath_is_a_storage_error(store: MemoryStore, g: GeneMemory) -> None:
    store.close()
    assert code_of(lambda: g.write_memory("k", b"v", "CACHE")) is ErrorCode.STORAGE_ERROR
    assert code_of(lambda: g.read_memory("k")) is ErrorCode.STORAGE_ERROR


def test_drop_agent_removes_everything(store: MemoryStore, g: GeneMemory, rot: Path) -> None:
    g.write_memory("k", b"v", "CACHE")
    store.drop_agent("agent")
    assert not store.has_agent("agent")
    assert actions(rot)[-1] == ("drop_agent", None)
    store.create_agent("agent")
    assert store.for_gene("agent", A, "d").query_memory() == []


def test_sqlite_uses_wal_and_indexes(rot: Path, clock: ManualClock) -> None:
    """SQLite only: the default .rotifer/playground.db (PostgreSQL's plans are checked
    in test_postgres_backend)."""
    import sqlite3
    store = MemoryStore.open(rot, url=f"sqlite:{rot / 'playground.db'}", clock=clock)
    store.create_agent("agent")  # the store stays open: its WAL file must exist
    conn = sqlite3.connect(rot / "playground.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    plans = {
        "cleanup": "SELECT key FROM memory_entries WHERE agent_id = 'a' AND category = 'CACHE' "
                   "ORDER BY updated_us, seq LIMIT 10",
        "expiry": "SELECT key FROM memory_entries WHERE agent_id = 'a' AND expires_us IS NOT NULL "
                  "AND expires_us <= 5 ORDER BY expires_us, seq LIMIT 10",
        "recent": "SELECT key FROM memory_entries WHERE agent_id = 'a' "
                  "ORDER BY updated_us DESC, seq DESC LIMIT 10",
    }
    for name, sql in plans.items():
        plan = " ".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql))
        assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (name, plan)
        assert "TEMP B-TREE" not in plan, (name, plan)
    assert os.path.exists(rot / "playground.db-wal")
    conn.close()
    store.close()


@pytest.mark.postgres
def test_postgres_walks_indexes_in_the_orders_the_rules_need(pg_fresh_url: str, rot: Path
                                                            ) -> None:
    """Cleanup, expiry and query order come straight off an index, with no sort step.
    (Sequential scans are disabled so the planner's choice on a tiny table does not
    hide a missing index.)"""
    import psycopg
    store = MemoryStore.open(rot, url=pg_fresh_url)
    store.create_agent("a")
    store.close()
    plans = {
        "cleanup": "SELECT key FROM memory_entries WHERE agent_id = 'a' AND category = 'CACHE' "
                   "ORDER BY updated_us, seq LIMIT 10",
        "expiry": "SELECT key FROM memory_entries WHERE agent_id = 'a' AND expires_us IS NOT NULL "
                  "AND expires_us <= 5 ORDER BY expires_us, seq LIMIT 10",
        "recent": "SELECT key FROM memory_entries WHERE agent_id = 'a' "
                  "ORDER BY updated_us DESC, seq DESC LIMIT 10",
    }
    with psycopg.connect(pg_fresh_url) as conn:
        conn.execute("SET enable_seqscan = off")
        for name, sql in plans.items():
            plan = " ".join(str(r[0]) for r in conn.execute("EXPLAIN " + sql))
            assert "Index" in plan, (name, plan)
            assert "Sort" not in plan, (name, plan)
