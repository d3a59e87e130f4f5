"""Issue 33, target 3: what a write pays per evicted entry, against the same
statements and the same append on raw sqlite3 (the floor, as :mod:`.lean`
measures a write's), at 100, 1,000 and 10,000 victims in one write.

On one SQLite file, four agents per victim count N, each holding N x (rounds x
iters + 3) CACHE entries of 32 B (key + value), so every measured write finds
N more to evict:

- **evict**: ``write_memory`` of a new key whose size is exactly N victims' on
  an agent at its quota (the store's rules, its lines, its index rows);
- **plain**: the same write on an agent with room (no eviction);
- **floor, evict**: on a raw ``sqlite3`` connection to the same file, the very
  statements the store runs for that write -- ``BEGIN IMMEDIATE``, the lookup,
  the cleanup order read (N rows fetched), the range ``DELETE`` of the first
  N - 1, the last by key, the upsert -- then the same chained append of N + 1
  lines of the store's length (``AuditLog.write`` of texts made once, on its
  own log), their N + 1 index rows (``executemany``), the agent's counters,
  ``COMMIT``; no rules, no line built, no row decoded;
- **floor, plain**: the same without the eviction (one line, one index row).

Per victim: (evict - plain) / N for the store, (floor evict - floor plain) / N
for the floor, in CPU time of this thread, interleaved, and the ratio the
median of the per-round ratios.  The floor without the append and the index
rows (the statements alone) is shown beside it.  PostgreSQL (when its binaries
are installed): the store's per-victim cost in wall-clock time on a throwaway
server (:mod:`.pgserver`), beside its plain write -- published, not judged.
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rotifer.memory import AuditLog, Category, MemoryStore
from rotifer.memory.audit.index import key_hash
from rotifer.memory.storage.sqlite import SqliteBackend, row_params
from rotifer.memory.storage.sqlite.transaction import (
    EVICT_BEFORE_SQL,
    INDEX_INSERT,
    OLDEST_SQL,
    PUT_SQL,
    SqliteTransaction,
)

from . import memory
from .report import Result, render
from .timing import Settings, _samples

#: Victims per write; the tiny settings (tests of the harness) take a few.
VICTIMS = (100, 1_000, 10_000)
TINY_VICTIMS = (3, 10)
#: Issue 33's target: the store's cost per victim over the floor's.
TARGET = 1.3
VICTIM_VALUE = 23  # + a 9-character key: 32 B a victim
UPDATE_AGENT = ("UPDATE memory_agents SET used_bytes = ?, next_seq = ?, last_us = ?, head = ? "
                "WHERE agent_id = ?")

Op = Callable[[], object]


def _victims(settings: Settings) -> tuple[int, ...]:
    return VICTIMS if max(settings.scales) >= 10_000 else TINY_VICTIMS


def _iters(victims: int, settings: Settings) -> int:
    return max(1, min(settings.iters // 4, 1_000 // victims))


def _fill(backend: SqliteBackend, agent: str, count: int, full: bool) -> None:
    small = os.urandom(VICTIM_VALUE)
    used = memory.populate(backend, agent, (
        memory.make_row(agent, f"c/{i:07d}", small, Category.CACHE, i + 1)
        for i in range(count)))
    # An epoch, as every agent made by ``agent create`` has (its lines carry it).
    backend.conn.execute("UPDATE memory_agents SET quota_bytes = ?, epoch = ? WHERE agent_id = ?",
                         (used if full else memory.BIG_QUOTA, "0123456789ab", agent))


def _sample_lines(store: MemoryStore, agent: str, victims: int) -> tuple[list[str], list[str]]:
    """The texts of the lines one evicting write of the store appended (the last
    ``victims`` + 1 of its log: N evictions and the write) and of a plain write's."""
    lines = store.audit.path.read_text().splitlines()  # type: ignore[union-attr]
    texts = [line[:line.rindex(',"prev":')] + "}" for line in lines[-(victims + 1):]]
    assert all(f'"agent":"{agent}"' in t for t in texts), texts[:2]
    return texts[:-1], texts[-1:]


def _floor(db: Path, log: AuditLog, agent: str, victims: int, value: bytes,
           texts: list[str], append: bool) -> Op:
    """One write on raw sqlite3 (see the module docstring); ``victims`` 0: a plain one."""
    conn = memory.raw_connection(db)
    numbers = itertools.count(10**9)
    lookup = SqliteTransaction.sql.lookup
    ts = 1_796_000_000_000_000
    # The index rows' columns after (agent, file_no), made once.
    # The last column is the line's SHA-256 (memory_audit_index.digest).
    digest = bytes(32)
    rest = [(i * 450, 450, 7, "", ts, "evict", key_hash(f"c/{i:07d}"), "CACHE", 32, digest)
            for i in range(victims)] + [(victims * 450, 400, 7, "", ts, "write", 1, "CACHE", 0,
                                         digest)]

    def write() -> None:
        n = next(numbers)
        key = f"n/{n:07d}"
        row = memory.make_row(agent, key, value, Category.PREFERENCE, n)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(lookup, (n, key, agent)).fetchone()
        if victims:
            cursor = conn.execute(OLDEST_SQL, (agent, "CACHE", key))
            taken = cursor.fetchmany(victims)  # key, size, updated_us, seq, created_by
            cursor.close()
            last = taken[-1]
            conn.execute(EVICT_BEFORE_SQL, (agent, "CACHE", last[2], last[3], key))
            conn.execute("DELETE FROM memory_entries WHERE agent_id = ? AND key IN (?)",
                         (agent, last[0]))
        conn.execute(PUT_SQL, row_params(row))
        head = ""
        if append:
            lines: list[dict[str, Any]] = [{"agent": agent, "seq": n, "action": "evict"}] * len(
                texts)  # what the append reads of them: the first's and last's mark
            head = log.write(lines, texts)
            conn.executemany(INDEX_INSERT, [(agent, n, *r) for r in rest])
        conn.execute(UPDATE_AGENT, (0, n + 1, n, head, agent))
        conn.execute("COMMIT")
    return write


def _per_victim(samples: dict[str, list[float]], victims: int, evict: str, plain: str
                ) -> list[float]:
    return [(e - p) / victims for e, p in zip(samples[evict], samples[plain], strict=True)]


def sqlite_results(root: Path, settings: Settings) -> list[Result]:
    root.mkdir(parents=True, exist_ok=True)
    results: list[Result] = []
    store = MemoryStore.open(root / "store")
    backend = store.backend
    assert isinstance(backend, SqliteBackend)
    db = root / "store" / "playground.db"
    logs = [AuditLog(root / f"floor-{n}.jsonl") for n in range(4)]
    try:
        for victims in _victims(settings):
            iters = _iters(victims, settings)
            count = victims * (settings.rounds * iters + 3)
            names = [f"{kind}-{victims}" for kind in ("evict", "plain", "fevict", "fplain",
                                                      "sevict", "splain")]
            for name in names:
                _fill(backend, name, count, name.startswith(("evict", "fevict", "sevict")))
            value = os.urandom(victims * 32 - 9)
            ev = store.for_gene(names[0], memory.GENE, memory.DOMAIN)
            pl = store.for_gene(names[1], memory.GENE, memory.DOMAIN)
            keys = (f"n/{i:07d}" for i in itertools.count())
            ev.write_memory(next(keys), value, "PREFERENCE")
            evict_texts, _ = _sample_lines(store, names[0], victims)
            pl.write_memory(next(keys), value, "PREFERENCE")
            _, plain_texts = _sample_lines(store, names[1], 0)
            ops: dict[str, Op] = {
                "evict": lambda: ev.write_memory(next(keys), value, "PREFERENCE"),  # noqa: B023
                "plain": lambda: pl.write_memory(next(keys), value, "PREFERENCE"),  # noqa: B023
                "floor evict": _floor(db, logs[0], names[2], victims, value,
                                      evict_texts + plain_texts, True),
                "floor plain": _floor(db, logs[1], names[3], 0, value, plain_texts, True),
                "sql evict": _floor(db, logs[2], names[4], victims, value, [], False),
                "sql plain": _floor(db, logs[3], names[5], 0, value, [], False),
            }
            samples = _samples(ops, rounds=settings.rounds, iters=iters, warmup=1,
                               clock=_thread_time)
            ours = _per_victim(samples, victims, "evict", "plain")
            floor = _per_victim(samples, victims, "floor evict", "floor plain")
            sql = _per_victim(samples, victims, "sql evict", "sql plain")
            left = store.agent_record(names[0])
            assert left.used_bytes <= left.quota_bytes
            group = f"eviction, SQLite, {victims:,} victims in one write"
            median = statistics.median
            results.append(Result(
                group, "per victim beyond a plain write", median(ours), median(floor),
                "floor: same statements + same append and index rows", "max", TARGET,
                median(o / f for o, f in zip(ours, floor, strict=True) if f > 0)))
            results.append(Result(
                group, "per victim beyond a plain write", median(ours), median(sql),
                "the statements alone (no append, no index rows)", "info", None,
                median(o / f for o, f in zip(ours, sql, strict=True) if f > 0)))
            results.append(Result(
                group, f"write that evicts {victims:,} ({victims * 32:,} B)",
                median(samples["evict"]), median(samples["plain"]),
                "plain write, same size", "info", None))
    finally:
        for log in logs:
            log.close()
        store.close()
    return results


def _thread_time() -> float:
    return time.thread_time()


PG_FILL = """
INSERT INTO memory_entries
SELECT %(agent)s, 'c/' || lpad((i - 1)::text, 7, '0'), 'CACHE', %(value)s, 32, %(gene)s,
       %(domain)s, %(gene)s, %(t0)s + i, %(t0)s + i, 'SAME_DOMAIN', 'SAME_DOMAIN', 'PRIVATE',
       NULL, NULL, i
FROM generate_series(1, %(n)s) i
"""


def postgres_results(root: Path, settings: Settings) -> list[Result] | str:
    """The store's cost per victim on PostgreSQL, in wall-clock time (the server's
    work is part of a write), beside its plain write; the agents filled on the
    server (``INSERT ... SELECT``) with the SQLite agents' rows."""
    import psycopg

    from . import pgserver

    bindir = pgserver.find_bindir()
    if bindir is None:
        return pgserver.MISSING
    results: list[Result] = []
    with pgserver.Server(bindir) as server:
        url = server.database("rotifer_eviction")
        with MemoryStore.open(root, url) as store:
            for victims in _victims(settings):
                iters = _iters(victims, settings)
                count = victims * (settings.rounds * iters + 3)
                names = {kind: f"{kind}-{victims}" for kind in ("evict", "plain")}
                with psycopg.connect(url, autocommit=True) as conn:
                    for kind, name in names.items():
                        store.create_agent(name, quota_bytes=memory.BIG_QUOTA)
                        conn.execute(PG_FILL, {"agent": name, "value": os.urandom(VICTIM_VALUE),
                                               "gene": memory.GENE, "domain": memory.DOMAIN,
                                               "t0": memory.T0_US, "n": count})
                        conn.execute("UPDATE memory_agents SET used_bytes = %s, next_seq = %s, "
                                     "quota_bytes = %s WHERE agent_id = %s",
                                     (32 * count, count + 1,
                                      32 * count if kind == "evict" else memory.BIG_QUOTA, name))
                    conn.execute("ANALYZE memory_entries")
                value = os.urandom(victims * 32 - 9)
                ev = store.for_gene(names["evict"], memory.GENE, memory.DOMAIN)
                pl = store.for_gene(names["plain"], memory.GENE, memory.DOMAIN)
                keys = (f"n/{i:07d}" for i in itertools.count())
                samples = _samples({
                    "evict": lambda: ev.write_memory(next(keys), value, "PREFERENCE"),  # noqa: B023
                    "plain": lambda: pl.write_memory(next(keys), value, "PREFERENCE"),  # noqa: B023
                }, rounds=settings.rounds, iters=iters, warmup=1, clock=time.perf_counter)
                left = store.agent_record(names["evict"])
                assert left.used_bytes <= left.quota_bytes
                group = f"eviction, PostgreSQL, {victims:,} victims in one write"
                results.append(Result(
                    group, "per victim beyond a plain write (wall clock)",
                    statistics.median(_per_victim(samples, victims, "evict", "plain")), None,
                    "", "info", None))
                results.append(Result(
                    group, f"write that evicts {victims:,} ({victims * 32:,} B), wall clock",
                    statistics.median(samples["evict"]), statistics.median(samples["plain"]),
                    "plain write, same size", "info", None))
    return results


def table(root: Path, settings: Settings) -> str:
    results = sqlite_results(root / "sqlite", settings)
    text = render(results) + (
        "\nSQLite: CPU time of this thread per write (`time.thread_time`), medians of "
        f"{settings.rounds} interleaved rounds; each ratio is the median of the per-round "
        f"ratios (paired); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
        "when it ended.\n")
    pg = postgres_results(root / "postgres", settings)
    if isinstance(pg, str):
        return text + "\n" + pg + ".\n"
    return text + "\n" + render(pg) + (
        "\nPostgreSQL (a throwaway server on this machine, `fsync=off`): wall-clock medians "
        f"of {settings.rounds} interleaved rounds; load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs when it ended.\n")
