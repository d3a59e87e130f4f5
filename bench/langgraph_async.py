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


def puts(store: Any, n: int, m_count: int) -> list[Awaitable[Any]]:
    """``6 * n * m_count`` ``aput``s of new keys (100 B values) in ten namespaces:
    every one a change the memory makes (the shape above makes none)."""
    return [store.aput(("docs", str(i % 10)), f"k{i}", {"v": "x" * 100})
            for i in range(6 * n * m_count)]


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


Shape = Callable[[Any, int, int], list[Awaitable[Any]]]


async def _ours(where: Path, n: int, m: int, url: str | None = None,
                shape: Shape = coroutines) -> tuple[float, float]:
    from rotifer.langgraph import RotiferStore

    mem = MemoryStore.open(where / "rotifer", url)
    try:
        mem.create_agent("lg", quota_bytes=memory.BIG_QUOTA)
        store = RotiferStore.for_gene(mem, "lg", memory.GENE, memory.DOMAIN)
        return await _timed(lambda: shape(store, n, m))
    finally:
        mem.close()


async def _sqlite(where: Path, n: int, m: int, shape: Shape = coroutines
                  ) -> tuple[float, float]:
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async with AsyncSqliteStore.from_conn_string(str(where / "lite.db")) as store:
        await store.setup()
        return await _timed(lambda: shape(store, n, m))


async def _timed(make: Callable[[], list[Awaitable[Any]]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    results = await asyncio.gather(*make())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(results) % 6 == 0
    return wall, cpu


async def _postgres(url: str, n: int, m: int, shape: Shape = coroutines
                    ) -> tuple[float, float]:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(url) as store:
        await store.setup()
        return await _timed(lambda: shape(store, n, m))


def measure(root: Path, n: int, m: int, rounds: int, server: Any = None,
            shape: Shape = coroutines) -> dict[str, tuple[float, float]]:
    """Medians of ``rounds`` runs of each store: on SQLite, or (with ``server``, a
    :class:`bench.pgserver.Server`) on PostgreSQL, each run in a fresh database."""
    ours, theirs = ("RotiferStore", "AsyncPostgresStore" if server else "AsyncSqliteStore")
    times: dict[str, list[tuple[float, float]]] = {ours: [], theirs: []}
    for r in range(rounds):
        for name in [ours, theirs] if r % 2 == 0 else [theirs, ours]:
            where = root / f"async-{shape.__name__}-{name}-{r}"
            where.mkdir(parents=True)
            if server is None:
                run = _ours(where, n, m, None, shape) if name == ours \
                    else _sqlite(where, n, m, shape)
            else:
                url = server.database(f"async_{shape.__name__}_{name.lower()}_{r}")
                run = _ours(where, n, m, url, shape) if name == ours \
                    else _postgres(url, n, m, shape)
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
    # The second shape: puts only, each a change (a tenth of the calls).
    pn = max(1, n // 10)
    results = [("SQLite", measure(root / "sqlite", n, m, rounds))]
    put_results = [("SQLite", measure(root / "sqlite", pn, m, rounds, shape=puts))]
    bindir = pgserver.find_bindir()
    if bindir is not None:
        with pgserver.Server(bindir) as server:
            results.append(("PostgreSQL", measure(root / "pg", n, m, rounds, server)))
            put_results.append(("PostgreSQL", measure(root / "pg", pn, m, rounds, server,
                                                      shape=puts)))
    lines += _rows(results)
    lines += ["", f"{6 * pn * m:,} `aput`s of new keys (100 B values, ten namespaces) "
              "gathered at once, each a change of the memory:", "",
              "| memory | store | wall | CPU |", "|---|---|---:|---:|"]
    lines += _rows(put_results)
    if bindir is None:
        lines.append("")
        lines.append(pgserver.MISSING)
    lines += ["", "Medians of the runs, each store in turn (the order alternating), each run "
              "on empty stores (a fresh PostgreSQL database each).", ""]
    return "\n".join(lines)


def _rows(results: list[tuple[str, dict[str, tuple[float, float]]]]) -> list[str]:
    lines: list[str] = []
    for label, got in results:
        (ours, a), (theirs, b) = got.items()
        lines += [f"| {label} | {ours} | {format_seconds(a[0])} | {format_seconds(a[1])} |",
                  f"| {label} | {theirs} | {format_seconds(b[0])} | {format_seconds(b[1])} |",
                  f"| {label} | ÷ | {a[0] / b[0]:.2f}× | {a[1] / b[1]:.2f}× |"]
    return lines
