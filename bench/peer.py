"""rotifer against a peer: LangGraph's ``SqliteStore`` (the ``bench`` extra).

Both stores hold the same data -- 10,000 entries per value size: filler, the
100 rows a query returns, a read target and a write target -- in their own
SQLite files with the same settings (WAL, ``synchronous=NORMAL``; LangGraph's
own default would be a rollback journal with ``synchronous=FULL``, which
would flatter rotifer).  A LangGraph value is a JSON object ``{"v": TEXT}``
whose text has the same length as rotifer's value bytes.

- put: ``store.put(ns, key, value)`` vs ``write_memory`` (an update);
- get: ``store.get(ns, key)`` vs ``read_memory`` by the gene that wrote it;
- search: ``store.search(ns, limit=100)`` over a namespace of 100 items vs
  ``query_memory({"keyPrefix": "q/", "limit": 100})``.

Throughput is 1 / time per call, so the table's ratio is LangGraph's time
over rotifer's ("× faster").
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rotifer.memory import Category, MemoryStore
from rotifer.memory.storage.sqlite import row_params
from rotifer.memory.storage.sqlite.transaction import PUT_SQL, SqliteTransaction

from . import memory
from .report import Result
from .timing import Settings, compare

ENTRIES = 10_000


def _lg_store(path: Path) -> Any:
    from langgraph.store.sqlite import SqliteStore

    conn = memory.raw_connection(path)
    store = SqliteStore(conn)
    store.setup()
    return store, conn


def _lg_populate(store: Any, entries: int, size: int) -> None:
    from langgraph.store.base import PutOp

    text = "x" * size
    small = "y" * memory.FILLER_BYTES
    ns = ("agent", f"s{size}")

    def ops() -> Iterator[Any]:
        for i in range(max(entries - memory.QUERY_ROWS - 2, 0)):
            yield PutOp((*ns, "f"), f"{i:07d}", {"v": small})
        for i in range(min(memory.QUERY_ROWS, entries)):
            yield PutOp((*ns, "q"), f"{i:03d}", {"v": text})
        yield PutOp((*ns, "r"), "key", {"v": text})
        yield PutOp((*ns, "w"), "key", {"v": text})

    store.batch(list(ops()))


def _raw_write(db: Path, agent: str, value: bytes) -> Callable[[], None]:
    """The SQL a ``write_memory`` needs and nothing else, on raw sqlite3: ``BEGIN
    IMMEDIATE``, the lookup (agent, expiry check, old row), the upsert, the
    agent's counters, ``COMMIT`` -- no rules, no audit line, no entry built.
    Against LangGraph's ``put`` it is the floor under the put row's ratio."""
    conn = memory.raw_connection(db)
    numbers = itertools.count(10**9)

    def write() -> None:
        n = next(numbers)
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(SqliteTransaction.sql.lookup, (n, "w/raw", agent)).fetchone()
        conn.execute(PUT_SQL, row_params(memory.make_row(agent, "w/raw", value,
                                                          Category.PATTERN, n)))
        # The agent's row is rewritten as a write does, its values kept.
        conn.execute("UPDATE memory_agents SET used_bytes = used_bytes, next_seq = next_seq, "
                     "last_us = last_us WHERE agent_id = ?", (agent,))
        conn.execute("COMMIT")
    return write


def available() -> bool:
    try:
        import langgraph.store.sqlite  # noqa: F401
    except ImportError:
        return False
    return True


def run(root: Path, settings: Settings) -> list[Result]:
    if not available():
        return [Result("peer", "LangGraph SqliteStore not installed (pip install -e '.[bench]')",
                       0.0, None, "", "info", None)]
    root.mkdir(parents=True, exist_ok=True)
    entries = min(ENTRIES, max(settings.scales))
    results: list[Result] = []
    store = MemoryStore.open(root / "rotifer")
    lg, conn = _lg_store(root / "langgraph.db")
    try:
        for size in settings.sizes:
            agent = f"agent-{size}"
            memory.populate(store.backend, agent,  # type: ignore[arg-type]
                            memory.standard_rows(agent, entries, size, 0))
            _lg_populate(lg, entries, size)
            mem = store.for_gene(agent, memory.GENE, memory.DOMAIN)
            value = os.urandom(size)
            doc = {"v": "x" * size}
            label = memory.size_label(size)
            group = f"vs LangGraph SqliteStore, {entries:,} entries"
            ns: tuple[str, ...] = ("agent", f"s{size}")
            assert len(lg.search((*ns, "q"), limit=100)) == min(memory.QUERY_ROWS, entries)
            t = compare({
                "langgraph": lambda: lg.put((*ns, "w"), "key", doc),  # noqa: B023
                "rotifer": lambda: mem.write_memory("w/key", value, "PATTERN"),  # noqa: B023
            }, rounds=settings.rounds, iters=settings.iters)
            results.append(Result(group, f"put / write_memory {label}", t["rotifer"],
                                  t["langgraph"], "put", "min", 1.0))
            statements = _raw_write(root / "rotifer" / "playground.db", agent, value)
            t = compare({"langgraph": lambda: lg.put((*ns, "w"), "key", doc),  # noqa: B023
                         "raw": statements}, rounds=settings.rounds, iters=settings.iters)
            results.append(Result(group, f"put / a write's 5 SQL statements alone, raw {label}",
                                  t["raw"], t["langgraph"], "put", "info", None))
            t = compare({
                "langgraph": lambda: lg.get((*ns, "r"), "key"),  # noqa: B023
                "rotifer": lambda: mem.read_memory("r/key"),  # noqa: B023
            }, rounds=settings.rounds, iters=settings.iters)
            results.append(Result(group, f"get / read_memory {label}", t["rotifer"],
                                  t["langgraph"], "get", "min", 2.0))
            t = compare({
                "langgraph": lambda: lg.search((*ns, "q"), limit=100),  # noqa: B023
                "rotifer": lambda: mem.query_memory({"keyPrefix": "q/", "limit": 100}),  # noqa: B023
            }, rounds=settings.rounds, iters=max(1, settings.iters // 4))
            results.append(Result(group, f"search / query_memory 100 × {label}", t["rotifer"],
                                  t["langgraph"], "search", "min", 2.0))
    finally:
        conn.close()
        store.close()
    return results
