"""The store against the physical floor: raw sqlite3 on the very same file.

Each scale gets its own database file holding one agent per value size.
Agents are populated fast: rows go straight through the SQLite backend's
connection in one transaction and the agent's ``used_bytes`` is set to their
sum, exactly what the store itself would have stored (same columns, same
indexes).

The floor runs on a second, raw sqlite3 connection to the same file (WAL,
``synchronous=NORMAL``), so both see the same table, indexes and WAL:

- write: ``BEGIN IMMEDIATE``; an upsert of the same row (same size, other
  key); ``COMMIT``; then one JSON line appended to a file opened once;
- read: one ``SELECT`` of the row by (agent, key);
- query: one ``SELECT`` of the 100 rows under a key prefix, newest first;
- delete: ``BEGIN IMMEDIATE``; ``DELETE`` one row; ``COMMIT``; one JSON line.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rotifer.memory import AuditLog, Category, GeneMemory, MemoryStore
from rotifer.memory.model import DEFAULT_ACCESS_POLICY, DataPolicy
from rotifer.memory.storage.backend import AgentRecord, Row
from rotifer.memory.storage.sqlite import ROW_COLUMNS, SqliteBackend, row_params
from rotifer.memory.storage.sqlite.transaction import EVICT_BEFORE_SQL, OLDEST_SQL

from .report import Result, render
from .timing import Settings, compare

GENE = "v2:" + "b" * 64
DOMAIN = "bench"
BIG_QUOTA = 1 << 40
QUERY_ROWS = 100
FILLER_BYTES = 100
T0_US = 1_780_000_000_000_000  # a fixed past instant; the store's clock is the real one

INSERT_SQL = (f"INSERT OR REPLACE INTO memory_entries ({ROW_COLUMNS.replace('value,', 'value, size,')}) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
UPSERT_SQL = (
    f"INSERT INTO memory_entries ({ROW_COLUMNS.replace('value,', 'value, size,')}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, key) DO UPDATE "
    "SET category = excluded.category, value = excluded.value, size = excluded.size, "
    "last_accessed_by = excluded.last_accessed_by, updated_us = excluded.updated_us, "
    "seq = excluded.seq")


def make_row(agent: str, key: str, value: bytes, category: Category, n: int) -> Row:
    return Row(agent_id=agent, key=key, category=category, value=value, created_by=GENE,
               creator_domain=DOMAIN, last_accessed_by=GENE, created_us=T0_US + n,
               updated_us=T0_US + n, access=DEFAULT_ACCESS_POLICY, retention=None,
               expires_us=None, seq=n)


def populate(backend: SqliteBackend, agent: str, rows: Iterator[Row], quota: int = BIG_QUOTA,
             used_extra: int = 0) -> int:
    """Create ``agent`` holding ``rows`` in one transaction; returns the bytes used."""
    used = 0
    count = 0

    def params() -> Iterator[tuple[Any, ...]]:
        nonlocal used, count
        for row in rows:
            used += row.size
            count += 1
            yield row_params(row)

    with backend.write(agent) as tx:
        tx.insert_agent(AgentRecord(agent, quota, DataPolicy(), 0, 1))
        tx.conn.executemany(INSERT_SQL, params())
        tx.update_agent(agent, used + used_extra, count + 1, 0)
    return used


def standard_rows(agent: str, entries: int, size: int, deletes: int) -> Iterator[Row]:
    """``entries`` rows: filler, 100 query rows ``q/...``, the read and write targets,
    plus ``deletes`` rows ``d/...`` and ``fd/...`` each for the delete comparison."""
    value = os.urandom(size)
    filler = max(entries - QUERY_ROWS - 3, 0)
    n = itertools.count(1)
    small = os.urandom(FILLER_BYTES)
    for i in range(filler):
        yield make_row(agent, f"f/{i:07d}", small, Category.CONTEXT, next(n))
    for i in range(min(QUERY_ROWS, entries)):
        yield make_row(agent, f"q/{i:03d}", value, Category.PATTERN, next(n))
    for key in ("r/key", "w/key", "w/floor"):
        yield make_row(agent, key, value, Category.PATTERN, next(n))
    for i in range(deletes):
        yield make_row(agent, f"d/{i:06d}", value, Category.CACHE, next(n))
        yield make_row(agent, f"fd/{i:06d}", value, Category.CACHE, next(n))


def raw_connection(db: Path) -> sqlite3.Connection:
    """A raw sqlite3 connection with the store's settings (WAL, ``synchronous=NORMAL``,
    autocommit: each measured operation says ``BEGIN``/``COMMIT`` itself)."""
    conn = sqlite3.connect(str(db), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class Floor:
    """Raw sqlite3 and one append-only file: the least any store must do."""

    def __init__(self, db: Path, log: Path) -> None:
        self.conn = raw_connection(db)
        self.fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self.seq = itertools.count(10**9)

    def close(self) -> None:
        os.close(self.fd)
        self.conn.close()

    def _line(self, action: str, agent: str, key: str, nbytes: int) -> None:
        line = {"ts": "2026-01-01T00:00:00.000000Z", "agent": agent, "action": action,
                "key": key, "category": "PATTERN", "actor": GENE, "bytes": nbytes,
                "entryId": "e" * 64}
        os.write(self.fd, json.dumps(line, separators=(",", ":")).encode() + b"\n")

    def write(self, agent: str, key: str, value: bytes) -> None:
        n = next(self.seq)
        row = make_row(agent, key, value, Category.PATTERN, n)
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute(UPSERT_SQL, row_params(row))
        self.conn.execute("COMMIT")
        self._line("update", agent, key, row.size)

    def read(self, agent: str, key: str) -> tuple[Any, ...] | None:
        r: tuple[Any, ...] | None = self.conn.execute(
            f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = ? AND key = ?",
            (agent, key)).fetchone()
        return r

    def query(self, agent: str, prefix: str, limit: int = QUERY_ROWS) -> list[Any]:
        upper = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        return self.conn.execute(
            f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = ? AND key >= ? "
            "AND key < ? ORDER BY updated_us DESC, seq DESC LIMIT ?",
            (agent, prefix, upper, limit)).fetchall()

    def delete(self, agent: str, key: str) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("DELETE FROM memory_entries WHERE agent_id = ? AND key = ?",
                          (agent, key))
        self.conn.execute("COMMIT")
        self._line("delete", agent, key, 0)


@dataclass
class Scale:
    """One database file at one entry count, an agent per value size."""

    entries: int
    dir: Path
    store: MemoryStore
    floor: Floor
    agents: dict[int, str] = field(default_factory=dict)

    def gene(self, size: int) -> GeneMemory:
        return self.store.for_gene(self.agents[size], GENE, DOMAIN)

    def close(self) -> None:
        self.floor.close()
        self.store.close()


def open_scale(root: Path, entries: int, settings: Settings, deletes: int) -> Scale:
    d = root / f"scale-{entries}"
    store = MemoryStore.open(d)
    assert isinstance(store.backend, SqliteBackend)
    scale = Scale(entries, d, store, Floor(d / "playground.db", d / "floor.jsonl"))
    for size in settings.sizes:
        agent = f"agent-{size}"
        populate(store.backend, agent, standard_rows(agent, entries, size, deletes))
        scale.agents[size] = agent
    store.backend.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return scale


def size_label(size: int) -> str:
    return f"{size // 1024} KiB" if size >= 1024 and size % 1024 == 0 else f"{size} B"


def delete_iters(settings: Settings) -> int:
    return max(1, settings.iters // 4)


def floor_suite(scale: Scale, settings: Settings) -> list[Result]:
    """write/read/query/delete against the floor, every value size, at one scale."""
    results: list[Result] = []
    group = f"store vs floor, {scale.entries:,} entries"
    for size in settings.sizes:
        agent = scale.agents[size]
        mem = scale.gene(size)
        value = os.urandom(size)
        floor = scale.floor
        label = size_label(size)
        t = compare({
            "floor": lambda: floor.write(agent, "w/floor", value),  # noqa: B023
            "rotifer": lambda: mem.write_memory("w/key", value, "PATTERN"),  # noqa: B023
        }, rounds=settings.rounds, iters=settings.iters)
        results.append(Result(group, f"write_memory {label} (update)", t["rotifer"],
                              t["floor"], "raw upsert + line", "max", 1.5))
        assert mem.read_memory("r/key") is not None
        t = compare({
            "floor": lambda: floor.read(agent, "r/key"),  # noqa: B023
            "rotifer": lambda: mem.read_memory("r/key"),  # noqa: B023
        }, rounds=settings.rounds, iters=settings.iters)
        results.append(Result(group, f"read_memory {label} (same gene)", t["rotifer"],
                              t["floor"], "raw point read", "max", 2.0))
        assert len(mem.query_memory({"keyPrefix": "q/", "limit": 100})) == min(
            QUERY_ROWS, scale.entries)
        t = compare({
            "floor": lambda: floor.query(agent, "q/"),  # noqa: B023
            "rotifer": lambda: mem.query_memory({"keyPrefix": "q/", "limit": 100}),  # noqa: B023
        }, rounds=settings.rounds, iters=settings.iters)
        results.append(Result(group, f"query_memory 100 × {label}", t["rotifer"],
                              t["floor"], "raw prefix query", "max", 1.5))
        mine = (f"d/{i:06d}" for i in itertools.count())
        theirs = (f"fd/{i:06d}" for i in itertools.count())
        t = compare({
            "floor": lambda: floor.delete(agent, next(theirs)),  # noqa: B023
            "rotifer": lambda: mem.delete_memory(next(mine)),  # noqa: B023
        }, rounds=settings.rounds, iters=delete_iters(settings), warmup=1)
        results.append(Result(group, f"delete_memory {label}", t["rotifer"], t["floor"],
                              "raw delete + line", "info", None))
    return results


def scale_suite(small: Scale, large: Scale, settings: Settings) -> list[Result]:
    """A write at the largest scale against one at the smallest."""
    results: list[Result] = []
    for size in settings.sizes:
        value = os.urandom(size)
        a, b = small.gene(size), large.gene(size)
        t = compare({
            "small": lambda: a.write_memory("w/key", value, "PATTERN"),  # noqa: B023
            "large": lambda: b.write_memory("w/key", value, "PATTERN"),  # noqa: B023
        }, rounds=settings.rounds, iters=settings.iters)
        results.append(Result(
            "scale", f"write_memory {size_label(size)} at {large.entries:,} entries",
            t["large"], t["small"], f"at {small.entries:,}", "max", 1.2))
    return results


#: Issue 24, target 3: a write that evicts N entries costs at most a plain write
#: plus this much CPU time per victim.
PER_VICTIM_TARGET = 5e-6


def eviction_suite(root: Path, settings: Settings) -> list[Result]:
    """Writes that must evict 1 and 100 CACHE entries against plain writes of the
    same size to new keys (the agents hold the same number of entries), in CPU
    time of this thread (interleaved rounds, so the ratio and the difference
    are of one run); for 100 victims also what each victim adds to a plain
    write (issue 24's target 3)."""
    d = root / "evict"
    results: list[Result] = []
    iters = max(1, settings.iters // 4)
    writes = settings.rounds * iters + 2 * iters + 4
    with MemoryStore.open(d) as store:
        assert isinstance(store.backend, SqliteBackend)
        backend = store.backend
        # (victims per write, victim value bytes, new value bytes): new size == victims' sizes
        for victims, victim_value in ((1, 100), (100, 24)):
            key_len = 8  # "c/000000", "n/000000"
            victim_size = key_len + victim_value
            new_value = os.urandom(victims * victim_size - key_len)
            count = victims * writes
            evict, plain = f"evict-{victims}", f"plain-{victims}"
            small = os.urandom(victim_value)
            used = populate(backend, evict, (
                make_row(evict, f"c/{i:06d}", small, Category.CACHE, i + 1)
                for i in range(count)))
            backend.conn.execute("UPDATE memory_agents SET quota_bytes = ? WHERE agent_id = ?",
                                 (used, evict))
            populate(backend, plain, (
                make_row(plain, f"c/{i:06d}", small, Category.CACHE, i + 1)
                for i in range(count)))
            ev, pl = store.for_gene(evict, GENE, DOMAIN), store.for_gene(plain, GENE, DOMAIN)
            ek = (f"n/{i:06d}" for i in itertools.count())
            pk = (f"n/{i:06d}" for i in itertools.count())
            t = compare({
                "plain": lambda: pl.write_memory(next(pk), new_value, "PREFERENCE"),  # noqa: B023
                "evict": lambda: ev.write_memory(next(ek), new_value, "PREFERENCE"),  # noqa: B023
            }, rounds=settings.rounds, iters=iters, cpu=True)
            left = store.agent_record(evict)
            assert left.used_bytes <= left.quota_bytes
            results.append(Result(
                "eviction", f"write that evicts {victims} ({len(new_value) + key_len} B)",
                t["evict"], t["plain"], "plain write, same size", "max",
                2.0 if victims == 1 else 3.0))
            if victims > 1:
                results.append(Result(
                    "eviction", f"CPU time per victim beyond a plain write ({victims} victims "
                    f"of {victim_size} B)", (t["evict"] - t["plain"]) / victims, None, "",
                    "abs", PER_VICTIM_TARGET))
        results += _raw_eviction(d / "playground.db", backend, writes, iters, settings)
    return results


def _raw_eviction(db: Path, backend: SqliteBackend, writes: int, iters: int,
                  settings: Settings) -> list[Result]:
    """What SQLite alone needs to evict 100 entries: raw sqlite3 doing only the
    eviction's statements, the store's own (the 100 oldest CACHE rows read off
    the cleanup index, the 99 before the last deleted as one range, the last by
    key, the new row upserted) against only a plain write's (the upsert), each
    in its own ``BEGIN IMMEDIATE``/``COMMIT``, on agents like the ones above.
    The ratio is the floor under the eviction row's ratio: no audit line, no
    rules; the second row is that floor per victim."""
    small = os.urandom(24)
    count = 100 * writes
    for agent in ("raw-evict", "raw-plain"):
        populate(backend, agent, (make_row(agent, f"c/{i:06d}", small, Category.CACHE, i + 1)
                                  for i in range(count)))
    conn = raw_connection(db)
    value = os.urandom(100 * 32 - 8)
    numbers = itertools.count(10**9)

    def upsert(agent: str) -> None:
        n = next(numbers)
        conn.execute(UPSERT_SQL, row_params(make_row(agent, f"n/{n}", value,
                                                     Category.PREFERENCE, n)))

    def plain() -> None:
        conn.execute("BEGIN IMMEDIATE")
        upsert("raw-plain")
        conn.execute("COMMIT")

    def evict() -> None:
        conn.execute("BEGIN IMMEDIATE")
        cursor = conn.execute(OLDEST_SQL, ("raw-evict", "CACHE", ""))
        rows = cursor.fetchmany(100)  # key, size, updated_us, seq, created_by
        cursor.close()
        last = rows[-1]
        conn.execute(EVICT_BEFORE_SQL, ("raw-evict", "CACHE", last[2], last[3], ""))
        conn.execute("DELETE FROM memory_entries WHERE agent_id = ? AND key = ?",
                     ("raw-evict", last[0]))
        upsert("raw-evict")
        conn.execute("COMMIT")

    try:
        t = compare({"plain": plain, "evict": evict}, rounds=settings.rounds, iters=iters,
                    cpu=True)
    finally:
        conn.close()
    return [Result("eviction", "raw SQL alone: evict 100 + upsert (the floor under the rows "
                   "above)", t["evict"], t["plain"], "raw upsert alone", "info", None),
            Result("eviction", "raw SQL alone: per victim beyond the upsert",
                   (t["evict"] - t["plain"]) / 100, None, "", "info", None)]


def eviction_table(root: Path, settings: Settings) -> str:
    """The eviction rows alone, in their own block of the doc (``python -m bench
    --only eviction``): issue 24's target 3 without the main table's hour."""
    results = eviction_suite(root, settings)
    load = os.getloadavg()[0]
    return (render(results) + f"\nCPU time of this thread per call (`time.thread_time`), "
            f"medians of {settings.rounds} interleaved rounds of {max(1, settings.iters // 4)} "
            f"writes; load average {load:.1f} on {os.cpu_count()} CPUs when the run ended.\n")


def audit_suite(root: Path, settings: Settings) -> list[Result]:
    """What the audit format of issue 15 costs one append: the store's chained
    append (lock, read the last line, hash it, splice ``prev`` in, one write)
    against a plain locked ``O_APPEND`` write of the same line."""
    root.mkdir(parents=True, exist_ok=True)
    log = AuditLog(root / "audit.jsonl")
    line = {"ts": "2026-01-01T00:00:00.000000Z", "agent": "bench", "action": "update",
            "key": "w/key", "category": "PATTERN", "actor": GENE, "bytes": 1024,
            "entryId": "e" * 64, "previousBytes": 1024, "seq": 1}
    data = json.dumps(line, separators=(",", ":")).encode() + b"\n"
    plain = root / "plain.jsonl"

    def floor() -> None:
        fd = os.open(plain, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, data)
        finally:
            os.close(fd)

    seqs = itertools.count(1)

    def chained() -> None:
        log.write([{**line, "seq": next(seqs)}])  # as the store: one change, one number

    t = compare({"floor": floor, "rotifer": chained},
                rounds=settings.rounds, iters=settings.iters)
    return [Result("audit log", "append one line (seq + hash chain)", t["rotifer"], t["floor"],
                   "locked O_APPEND write", "info", None)]


def run(root: Path, settings: Settings) -> list[Result]:
    deletes = settings.rounds * delete_iters(settings) + 4
    scales = [open_scale(root, n, settings, deletes) for n in settings.scales]
    try:
        results: list[Result] = []
        for scale in scales:
            results += floor_suite(scale, settings)
        results += scale_suite(scales[0], scales[-1], settings)
        results += eviction_suite(root, settings)
        results += audit_suite(root, settings)
        return results
    finally:
        for scale in scales:
            scale.close()
