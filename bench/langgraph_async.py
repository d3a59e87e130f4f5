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


async def _ours(where: Path, n: int, m: int) -> tuple[float, float]:
    from rotifer.langgraph import RotiferStore

    mem = MemoryStore.open(where / "rotifer")
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


def measure(root: Path, n: int, m: int, rounds: int) -> dict[str, tuple[float, float]]:
    times: dict[str, list[tuple[float, float]]] = {"RotiferStore": [], "AsyncSqliteStore": []}
    for r in range(rounds):
        order = [("RotiferStore", _ours), ("AsyncSqliteStore", _sqlite)]
        for name, run in order if r % 2 == 0 else order[::-1]:
            where = root / f"async-{name}-{r}"
            where.mkdir(parents=True)
            times[name].append(asyncio.run(run(where, n, m)))
    return {name: (statistics.median(w for w, _ in got), statistics.median(c for _, c in got))
            for name, got in times.items()}


def table(root: Path, settings: Settings) -> str:
    from . import adapter

    if not adapter.available():
        return "LangGraph is not installed (`pip install -e '.[langgraph,bench]'`): no figures.\n"
    n, m = (1000, 10) if max(settings.scales) >= 100_000 else (100, 10)
    if settings.rounds <= 3:
        n, m = 10, 2
    got = measure(root, n, m, 3 if settings.rounds > 3 else 1)
    ours, lite = got["RotiferStore"], got["AsyncSqliteStore"]
    return "\n".join([
        f"`test_large_batches_async` shape, {6 * n * m:,} coroutines gathered at once:", "",
        "| store | wall | CPU |", "|---|---:|---:|",
        f"| RotiferStore (SQLite memory) | {format_seconds(ours[0])} | {format_seconds(ours[1])} |",
        f"| AsyncSqliteStore | {format_seconds(lite[0])} | {format_seconds(lite[1])} |",
        f"| ÷ | {ours[0] / lite[0]:.2f}× | {ours[1] / lite[1]:.2f}× |", "",
        "Medians of the runs, each store in turn (the order alternating), each run on "
        "empty stores.", ""])
