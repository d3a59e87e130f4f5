"""Cost independent of what a call leaves out: the same call over a small and a
large agent, on SQLite and PostgreSQL (issue 24, target 4).

Each backend gets an agent of 100 entries and agents of 10,000 and 1,000,000
(``Settings.scaling``; ``--quick``: 100,000), each holding ``n`` entries under
``f/`` (100 B values, the four categories in turn, one update time each) and
100 more under ``q/`` spread evenly through them, so the ``q/`` query has the
same 100 answers at every scale but none of them is among the newest.  Every
call is timed in CPU time (``time.thread_time``: the machine's load moves it
far less than wall time), interleaved with the same call on the small agent,
and reported as the ratio large / small: the target is 2x (1.2x for a write).

PostgreSQL: the agents are filled with one ``INSERT ... SELECT`` from
``generate_series`` and ``ANALYZE``d, as autovacuum would; the CPU time is the
client's, so for PostgreSQL the ratio also shows the plan only through the
rows the server sends (the plans are checked in ``tests/memory/test_query_plans.py``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rotifer.memory import Category, MemoryStore
from rotifer.memory.clock import format_time
from rotifer.memory.storage.backend import Row

from .memory import BIG_QUOTA, DOMAIN, GENE, T0_US, make_row, populate
from .report import Result, render
from .timing import Settings, compare

SMALL = 100
QUERY_KEYS = 100
CATEGORIES = (Category.CACHE, Category.PATTERN, Category.CONTEXT, Category.PREFERENCE)


def _agent(n: int) -> str:
    return f"agent-{n}"


def _rows(agent: str, n: int) -> Iterator[Row]:
    """``n`` entries under ``f/`` and 100 under ``q/`` spread evenly among them."""
    value = os.urandom(100)
    every = max(n // QUERY_KEYS, 1)
    seq = 0
    q = 0
    for i in range(n):
        seq += 1
        yield make_row(agent, f"f/{i:07d}", value, CATEGORIES[i % 4], seq)
        if i % every == every - 1 and q < QUERY_KEYS:
            seq += 1
            yield make_row(agent, f"q/{q:03d}", value, Category.PATTERN, seq)
            q += 1
    while q < QUERY_KEYS:
        seq += 1
        yield make_row(agent, f"q/{q:03d}", value, Category.PATTERN, seq)
        q += 1


PG_FILL = """
INSERT INTO memory_entries
SELECT %(agent)s, k, c, %(value)s, length(k) + 100, %(gene)s, %(domain)s, %(gene)s,
       %(t0)s + s, %(t0)s + s, 'SAME_DOMAIN', 'SAME_DOMAIN', 'PRIVATE', NULL, NULL, s
FROM (SELECT 'f/' || lpad((i - 1)::text, 7, '0') AS k,
             (ARRAY['CACHE','PATTERN','CONTEXT','PREFERENCE'])[1 + (i - 1) %% 4] AS c,
             i + (i - 1) / %(every)s AS s
      FROM generate_series(1, %(n)s) i
      UNION ALL
      SELECT 'q/' || lpad((j - 1)::text, 3, '0'), 'PATTERN', j * (%(every)s + 1)
      FROM generate_series(1, 100) j) rows
"""


def _fill_postgres(url: str, store: MemoryStore, n: int) -> None:
    """The agent of ``n`` through SQL on the server (a million rows through the
    client would take minutes): same columns, sizes and order as :func:`_rows`
    (the default access policy, no retention)."""
    import psycopg

    agent = _agent(n)
    every = max(n // QUERY_KEYS, 1)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO memory_agents (agent_id, quota_bytes, max_retention_days, "
                     "anonymization_supported, used_bytes, next_seq, last_us) "
                     "VALUES (%s, %s, NULL, false, 0, 1, 0)", (agent, BIG_QUOTA))
        conn.execute(PG_FILL, {"agent": agent, "value": os.urandom(100), "gene": GENE,
                               "domain": DOMAIN, "t0": T0_US, "every": every, "n": n})
        conn.execute("UPDATE memory_agents SET used_bytes = (SELECT sum(size) FROM "
                     "memory_entries WHERE agent_id = %s), next_seq = (SELECT max(seq) + 1 "
                     "FROM memory_entries WHERE agent_id = %s) WHERE agent_id = %s",
                     (agent, agent, agent))
        conn.execute("ANALYZE memory_entries")
    assert store.agent_record(agent).used_bytes > 0


def _calls(store: MemoryStore, n: int) -> dict[str, Callable[[], object]]:
    agent = _agent(n)
    mem = store.for_gene(agent, GENE, DOMAIN)
    mid = T0_US + n // 2
    since, until = format_time(mid), format_time(mid)
    value = os.urandom(100)
    mem.write_memory("w/key", value, "PATTERN")
    deployer = store.deployer(agent)
    return {
        "query_memory limit 10": lambda: mem.query_memory({"limit": 10}),
        "query_memory limit 100": lambda: mem.query_memory({"limit": 100}),
        "query_memory limit 10, since": lambda: mem.query_memory({"limit": 10, "since": since}),
        "query_memory limit 10, until": lambda: mem.query_memory({"limit": 10, "until": until}),
        "query_memory limit 10, category": lambda: mem.query_memory(
            {"limit": 10, "category": "CACHE"}),
        "query_memory keyPrefix f/ (most keys), limit 10": lambda: mem.query_memory(
            {"keyPrefix": "f/", "limit": 10}),
        "query_memory keyPrefix q/ (100 old keys), limit 100": lambda: mem.query_memory(
            {"keyPrefix": "q/", "limit": 100}),
        "query_memory keyPrefix f/000 (the oldest 10,000 keys), limit 10": lambda: (
            mem.query_memory({"keyPrefix": "f/000", "limit": 10})),
        "agent memory list, first page of 100": lambda: deployer.page(limit=100),
        "read_memory": lambda: mem.read_memory("f/0000007"),
        "write_memory 100 B (update)": lambda: mem.write_memory("w/key", value, "PATTERN"),
    }


def _measure(backend: str, store: MemoryStore, scales: tuple[int, ...], settings: Settings
             ) -> list[Result]:
    results: list[Result] = []
    small = _calls(store, SMALL)
    large = {n: _calls(store, n) for n in scales}
    for name, op in small.items():
        for n in scales:
            assert _same(op(), large[n][name]()), (name, n)
            t = compare({"small": op, "large": large[n][name]}, rounds=settings.rounds,
                        iters=settings.iters, cpu=True)
            target = 1.2 if name.startswith("write") else 2.0
            # The residue the key-prefix plans leave (docs/backends.md): many
            # matches, none recent -- shown, not judged.
            judged = "f/000" not in name
            results.append(Result(f"scale, {backend}", f"{name} at {n:,} entries", t["large"],
                                  t["small"], f"at {SMALL}", "max" if judged else "info",
                                  target if judged else None))
    return results


def _same(a: object, b: object) -> bool:
    """Both answers have the same shape (lengths), so the comparison is fair."""
    if isinstance(a, tuple):
        a, b = a[0], b[0]  # type: ignore[index]
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b)
    return True


def run(root: Path, settings: Settings) -> list[Result]:
    root.mkdir(parents=True, exist_ok=True)
    scales = settings.scaling
    results: list[Result] = []
    with MemoryStore.open(root / "sqlite") as store:
        backend: Any = store.backend
        for n in (SMALL, *scales):
            populate(backend, _agent(n), _rows(_agent(n), n))
        conn: sqlite3.Connection = backend.conn
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        results += _measure("SQLite", store, scales, settings)
    from . import pgserver

    bindir = pgserver.find_bindir()
    if bindir is None:
        return results
    with pgserver.Server(bindir) as server:
        url = server.database("scaling")
        with MemoryStore.open(root / "pg", url=url) as store:
            for n in (SMALL, *scales):
                _fill_postgres(url, store, n)
            results += _measure("PostgreSQL", store, scales, settings)
    return results



def table(root: Path, settings: Settings) -> str:
    """The suite's own table (``python -m bench --only scaling`` rewrites just it)."""
    results = run(root, settings)
    load = os.getloadavg()[0]
    return (render(results) + f"\nCPU time of this thread per call (medians of {settings.rounds} "
            f"interleaved rounds of {settings.iters}); load average {load:.1f} on "
            f"{os.cpu_count()} CPUs when the run ended.\n")
