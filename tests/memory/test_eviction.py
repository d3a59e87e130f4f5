"""Evictions of many entries: which ones go, and the audit bytes they leave.

Issue 24 made an eviction cheaper (its victims picked by one exact scan, deleted
by one range, their lines built in one pass); these tests pin what must not
move while doing so, on both backends:

* the victims are exactly the rule's: CACHE, then PATTERN, then CONTEXT, each
  least recently updated first with ties in write order (``seq``), never
  PREFERENCE, never the entry being written -- also among many entries with
  the same ``updatedAt``, put straight through the backend as an import may;
* the store is left holding exactly what the lines say was not removed;
* the audit log's bytes are the ones the code before issue 24 wrote for the
  same calls (a digest of them, made with that code and the test clock).
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from pathlib import Path

import pytest

from rotifer.memory import ErrorCode, ManualClock, MemoryStore
from rotifer.memory.model import DEFAULT_ACCESS_POLICY, Category
from rotifer.memory.storage.backend import Row
from rotifer.memory.storage.sqlite.transaction import EVICT_BEFORE_SQL, OLDEST_SQL

from .helpers import RETAIN_1_DAY, audit_lines, code_of, gene_id

A, B = gene_id("a"), gene_id("b")
T0 = 1_772_366_400_000_000  # 2026-03-01T12:00:00Z, the clock fixture's time


def _row(agent: str, key: str, category: Category, size: int, updated_us: int, seq: int,
         creator: str = A) -> Row:
    value = b"v" * (size - len(key.encode()))
    return Row(agent_id=agent, key=key, category=category, value=value, created_by=creator,
               creator_domain="d", last_accessed_by=creator, created_us=updated_us,
               updated_us=updated_us, access=DEFAULT_ACCESS_POLICY, retention=None,
               expires_us=None, seq=seq)


def _put(store: MemoryStore, agent: str, rows: list[Row]) -> None:
    """Store ``rows`` as they are (times and numbers included), as an import does."""
    record = store.agent_record(agent)
    with store.backend.write(agent) as tx:
        for row in rows:
            tx.put(row)
        tx.update_agent(agent, record.used_bytes + sum(r.size for r in rows),
                        max(record.next_seq, *(r.seq + 1 for r in rows)),
                        max(record.last_us, *(r.updated_us for r in rows)))


def _evicted(rot: Path) -> list[str]:
    return [line["key"] for line in audit_lines(rot) if line["action"] == "evict"]


def _stored(store: MemoryStore, agent: str) -> dict[str, int]:
    with store.backend.read() as tx:
        return {row.key: row.size for row in tx.iter_by_key(agent)}


def test_many_victims_with_one_update_time_go_in_write_order(
        empty_store: MemoryStore, rot: Path) -> None:
    """60 CACHE entries updated in the same microsecond, their write numbers
    shuffled against their keys and against the order they were stored in: an
    eviction of 45 takes the 45 lowest numbers, in that order.  Older PATTERN
    and CONTEXT entries and the oldest of all, PREFERENCE, wait their turn."""
    store = empty_store
    rng = random.Random(24)
    seqs = rng.sample(range(1, 500), 60)
    cache = [_row("ag", f"c/{i:02d}", Category.CACHE, 20, T0, seq) for i, seq in enumerate(seqs)]
    rng.shuffle(cache)
    older = [_row("ag", f"p/{i}", Category.PATTERN, 20, T0 - 100 + i, 600 + i) for i in range(5)]
    older += [_row("ag", f"x/{i}", Category.CONTEXT, 20, T0 - 200 + i, 700 + i) for i in range(5)]
    older += [_row("ag", f"f/{i}", Category.PREFERENCE, 20, T0 - 300 + i, 800 + i)
              for i in range(5)]
    store.create_agent("ag", quota_bytes=20 * 75)
    _put(store, "ag", cache + older)
    g = store.for_gene("ag", A, "d")

    g.write_memory("n/1", b"v" * (45 * 20 - 3), "PREFERENCE")
    order = [r.key for r in sorted(cache, key=lambda r: r.seq)]
    assert _evicted(rot) == order[:45]
    # Then the other 15 CACHE entries, the PATTERN ones oldest first, one CONTEXT.
    g.write_memory("n/2", b"v" * (21 * 20 - 3), "PREFERENCE")
    assert _evicted(rot) == [*order, "p/0", "p/1", "p/2", "p/3", "p/4", "x/0"]
    stored = _stored(store, "ag")
    assert sorted(stored) == sorted(["n/1", "n/2", "x/1", "x/2", "x/3", "x/4",
                                     *(f"f/{i}" for i in range(5))])
    assert store.usage("ag")[0] == sum(stored.values())


def test_the_entry_being_rewritten_is_passed_over(empty_store: MemoryStore, rot: Path) -> None:
    """Rewriting the oldest CACHE entry larger evicts the ones after it, never it."""
    store = empty_store
    store.create_agent("ag", quota_bytes=20 * 30)
    _put(store, "ag", [_row("ag", f"c/{i:02d}", Category.CACHE, 20, T0 + i, i + 1)
                       for i in range(30)])
    g = store.for_gene("ag", A, "d")
    g.write_memory("c/00", b"v" * (11 * 20 - 4), "CACHE")  # 10 more entries' worth
    assert _evicted(rot) == [f"c/{i:02d}" for i in range(1, 11)]
    stored = _stored(store, "ag")
    assert sorted(stored) == ["c/00", *(f"c/{i:02d}" for i in range(11, 30))]
    assert stored["c/00"] == 11 * 20
    assert store.usage("ag")[0] == sum(stored.values()) == 30 * 20


def test_victims_that_share_time_and_number_leave_the_log_true(
        empty_store: MemoryStore, rot: Path) -> None:
    """Entries sharing both ``updatedAt`` and ``seq`` (never made by the store,
    possible in a hand-made one): the rule leaves their order open, but exactly
    the entries the lines name are removed, and exactly as many as needed."""
    store = empty_store
    store.create_agent("ag", quota_bytes=20 * 40)
    rows = [_row("ag", f"c/{i:02d}", Category.CACHE, 20, T0 + i // 10, 1 + i // 10)
            for i in range(40)]
    random.Random(7).shuffle(rows)
    _put(store, "ag", rows)
    g = store.for_gene("ag", A, "d")
    g.write_memory("n/1", b"v" * (15 * 20 - 3), "PREFERENCE")
    evicted = _evicted(rot)
    assert len(evicted) == len(set(evicted)) == 15
    assert sorted(evicted[:10]) == [f"c/{i:02d}" for i in range(10)]  # the oldest ten first
    assert all(k.startswith("c/1") for k in evicted[10:])
    stored = _stored(store, "ag")
    assert set(stored) == {r.key for r in rows} - set(evicted) | {"n/1"}
    assert store.usage("ag")[0] == sum(stored.values())


def test_a_write_that_does_not_fit_evicts_nothing(empty_store: MemoryStore, rot: Path) -> None:
    store = empty_store
    store.create_agent("ag", quota_bytes=20 * 30)
    rows = [_row("ag", f"c/{i:02d}", Category.CACHE, 20, T0 + i, i + 1) for i in range(20)]
    rows += [_row("ag", f"f/{i:02d}", Category.PREFERENCE, 20, T0 + 50 + i, 50 + i)
             for i in range(10)]
    _put(store, "ag", rows)
    g = store.for_gene("ag", A, "d")
    before = _stored(store, "ag")
    assert code_of(lambda: g.write_memory("n/1", b"v" * (21 * 20 - 3), "PREFERENCE")
                   ) is ErrorCode.QUOTA_EXCEEDED
    assert _stored(store, "ag") == before
    assert _evicted(rot) == []


def test_sqlite_reads_and_deletes_victims_along_the_cleanup_index(tmp_path: Path) -> None:
    """Both statements walk the cleanup index from the agent's oldest entry of the
    category: no scan, no sort (the read is stepped only as far as needed)."""
    db = tmp_path / "m.db"
    MemoryStore.open(tmp_path / ".rotifer", url=f"sqlite:{db}").close()
    conn = sqlite3.connect(db)
    try:
        for sql, params in ((OLDEST_SQL, ("a", "CACHE", "k")),
                            (EVICT_BEFORE_SQL, ("a", "CACHE", 1, 2, "k"))):
            plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
            assert len(plan) == 1 and plan[0].startswith(
                "SEARCH memory_entries USING INDEX memory_entries_cleanup "
                "(agent_id=? AND category=?"), plan
    finally:
        conn.close()


#: SHA-256 of the audit log :func:`_history` leaves, as written by the code
#: before issue 24's eviction work (epoch fixed, the test clock).
HISTORY_DIGEST = "0e933378eb6d674c86f01dbece568673afd9ac01cfaccd9e55706e3bbf8fe8dd"
HISTORY_LINES = 137


def _history(store: MemoryStore, clock: ManualClock) -> None:
    """Calls whose lines cover every way a removal of many entries is logged:
    evictions within a category and across categories (of entries two genes
    created, keys needing JSON escapes), a rewrite passed over by its own
    eviction, a refused write, and expiries purged by the next call."""
    store.create_agent("hist", quota_bytes=2000)
    a, b = store.for_gene("hist", A, "one"), store.for_gene("hist", B, "two")
    for i in range(40):
        key = f"c/{i:02d}" if i % 7 else f'c/ü"\\{i:02d}\u2028'
        (a if i % 3 else b).write_memory(key, b"v" * (16 + i % 5), "CACHE")
        if i % 4 == 0:
            clock.advance(seconds=1)
    for i in range(12):
        b.write_memory(f"p/{i:02d}", b"p" * 30, "PATTERN")
        a.write_memory(f"x/{i:02d}", b"x" * 30, "CONTEXT",
                       retention_policy=RETAIN_1_DAY if i % 2 else None)
        clock.advance(seconds=1)
    for i in range(6):
        a.write_memory(f"f/{i}", b"f" * 40, "PREFERENCE")
    a.write_memory("c/01", b"w" * 300, "CACHE")                 # passes over itself
    a.write_memory("n/big", b"n" * 400, "PREFERENCE")          # many CACHE victims
    b.write_memory("n/bigger", b"n" * 1100, "PREFERENCE")       # CACHE, PATTERN, CONTEXT
    assert code_of(lambda: a.write_memory("n/huge", b"n" * 5000, "PREFERENCE")
                   ) is ErrorCode.QUOTA_EXCEEDED
    clock.advance(seconds=2 * 86400)
    a.query_memory({"limit": 5})                                # expiries
    a.write_memory("n/last", b"l" * 150, "PREFERENCE")


def test_the_audit_bytes_of_evictions_are_unchanged(
        empty_store: MemoryStore, clock: ManualClock, rot: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("rotifer.memory.store.new_epoch", lambda: "0123456789ab")
    _history(empty_store, clock)
    data = (rot / "audit.jsonl").read_bytes()
    lines = [json.loads(line) for line in data.splitlines()]
    actions = [line["action"] for line in lines]
    assert actions.count("evict") > 50 and actions.count("expire") >= 3
    assert {line["category"] for line in lines if line["action"] == "evict"} == {
        "CACHE", "PATTERN", "CONTEXT"}
    assert (len(lines), hashlib.sha256(data).hexdigest()) == (HISTORY_LINES, HISTORY_DIGEST)
    kept = empty_store.backend
    with kept.read() as tx:
        copy = tx.audit_lines("hist")
        if copy is not None:  # PostgreSQL keeps the lines too, without "prev"
            assert list(copy) == [{k: v for k, v in line.items() if k != "prev"}
                                  for line in lines if line["agent"] == "hist"]


def test_an_eviction_line_reads_as_before(empty_store: MemoryStore, clock: ManualClock,
                                         rot: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One eviction line spelled out (the digest above says no byte moved)."""
    monkeypatch.setattr("rotifer.memory.store.new_epoch", lambda: "0123456789ab")
    store = empty_store
    store.create_agent("ag", quota_bytes=40)
    store.for_gene("ag", B, "two").write_memory('c/"ü', b"v" * 15, "CACHE")
    store.for_gene("ag", A, "one").write_memory("n", b"v" * 39, "PREFERENCE")
    line = (rot / "audit.jsonl").read_bytes().splitlines()[1]
    eid = hashlib.sha256('ag\x00c/"ü'.encode()).hexdigest()
    assert line.decode() == (
        '{"ts":"2026-03-01T12:00:00.000001Z","agent":"ag","action":"evict","key":"c/\\"ü",'
        f'"category":"CACHE","actor":"{A}","bytes":20,"entryId":"{eid}",'
        f'"createdBy":"{B}","forKey":"n","epoch":"0123456789ab","seq":2,'
        f'"prev":"{hashlib.sha256((rot / "audit.jsonl").read_bytes().splitlines()[0]).hexdigest()}"}}')
