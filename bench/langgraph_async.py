"""LangGraph's ``test_large_batches_async`` as a bench (issue 32): ``M * N``
rounds of six concurrent calls (``aput``, ``aget``, ``alist_namespaces``,
``asearch``, ``aput``, ``adelete`` on ``("test", "foo", "bar", "baz", m % 2)``),
all gathered at once, on rotifer's LangGraph store (one gene, an SQLite
``MemoryStore``) and on LangGraph's ``AsyncSqliteStore`` (its own file).  60,000
coroutines in the full run (N=1000, M=10), as LangGraph's PostgreSQL test.

Wall time and CPU time of the whole gather, each store once per round, the
order alternating; medians.  Both stores are empty at the start of each run.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rotifer.memory import MemoryStore

from . import memory
from .report import format_seconds
from .timing import Settings


def coroutines(store: Any, n: int, m_count: int) -> list[Awaitable[Any]]:
    coros: list[Awaitable[Any]] = []
    for m in range(m_count):
        ns = ("test", "foo", "bar", "baz", str(m % 2))
        for i in range(n):
            coros += [store.aput(ns, f"key{i}", value={"foo": "bar" + str(i)}),
                      store.aget(ns, f"key{i}"),
                      store.alist_namespaces(prefix=None, max_depth=m + 1),
                      store.asearch(("test",)),
                      store.aput(ns, f"key{i}", value={"foo": "bar" + str(i)}),
                      store.adelete(ns, f"key{i}")]
    return coros


async def _ours(where: Path, n: int, m: int, url: str | None = None) -> tuple[float, float]:
    from rotifer.langgraph import RotiferStore

    mem = MemoryStore.open(where / "rotifer", url)
    try:
        mem.create_agent("lg", quota_bytes=memory.BIG_QUOTA)
        store = RotiferStore.for_gene(mem, "lg", memory.GENE, memory.DOMAIN)
        return await _timed(lambda: coroutines(store, n, m))
    finally:
        mem.close()


async def _sqlite(where: Path, n: int, m: int) -> tuple[float, float]:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async with AsyncSqliteStore.from_conn_string(str(where / "lite.db")) as store:
        await store.setup()
        return await _timed(lambda: coroutines(store, n, m))


async def _timed(make: Callable[[], list[Awaitable[Any]]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*make())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(results) % 6 == 0
    return wall, cpu


async def _postgres(url: str, n: int, m: int) -> tuple[float, float]:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(url) as store:
        await store.setup()
        return await _timed(lambda: coroutines(store, n, m))


def measure(root: Path, n: int, m: int, rounds: int, server: Any = None
            ) -> dict[str, tuple[float, float]]:
    """Medians of ``rounds`` runs of each store: on SQLite, or (with ``server``, a
    :class:`bench.pgserver.Server`) on PostgreSQL, each run in a fresh database."""
    ours, theirs = ("RotiferStore", "AsyncPostgresStore" if server else "AsyncSqliteStore")
    times: dict[str, list[tuple[float, float]]] = {ours: [], theirs: []}
    for r in range(rounds):
        for name in [ours, theirs] if r % 2 == 0 else [theirs, ours]:
            where = root / f"async-{name}-{r}"
            where.mkdir(parents=True)
            if server is None:
                run = _ours(where, n, m) if name == ours else _sqlite(where, n, m)
            else:
                url = server.database(f"async_{name.lower()}_{r}")
                run = _ours(where, n, m, url) if name == ours else _postgres(url, n, m)
            times[name].append(asyncio.run(run))
    return {name: (statistics.median(w for w, _ in got), statistics.median(c for _, c in got))
            for name, got in times.items()}


def table(root: Path, settings: Settings) -> str:
    from . import adapter, pgserver

    if not adapter.available():
        return "LangGraph is not installed (`pip install -e '.[langgraph,bench]'`): no figures.\n"
    n, m = (1000, 10) if max(settings.scales) >= 100_000 else (100, 10)
    if settings.rounds <= 3:
        n, m = 10, 2
    rounds = 3 if settings.rounds > 3 else 1
    lines = [f"`test_large_batches_async` shape, {6 * n * m:,} coroutines gathered at once:",
             "", "| memory | store | wall | CPU |", "|---|---|---:|---:|"]
    results = [("SQLite", measure(root / "sqlite", n, m, rounds))]
    bindir = pgserver.find_bindir()
    if bindir is not None:
        with pgserver.Server(bindir) as server:
            results.append(("PostgreSQL", measure(root / "pg", n, m, rounds, server)))
    for label, got in results:
        (ours, a), (theirs, b) = got.items()
        lines += [f"| {label} | {ours} | {format_seconds(a[0])} | {format_seconds(a[1])} |",
                  f"| {label} | {theirs} | {format_seconds(b[0])} | {format_seconds(b[1])} |",
                  f"| {label} | ÷ | {a[0] / b[0]:.2f}× | {a[1] / b[1]:.2f}× |"]
    if bindir is None:
        lines.append("")
        lines.append(pgserver.MISSING)
    lines += ["", "Medians of the runs, each store in turn (the order alternating), each run "
              "on empty stores (a fresh PostgreSQL database each).", ""]
    return "\n".join(lines)
