"""Issue 33, target 4: a ``keyPrefix`` query against the plain query of the same
page size, both beside LangGraph's ``search`` on the matching namespace.

One SQLite file, two agents of 10,000 entries of 100 B (the peer suite's
values): ``recent``, whose 100 ``q/`` keys are among its newest entries (the
bench's usual shape, :func:`bench.memory.standard_rows`), and ``old``, whose
100 ``q/`` keys were written first, 9,900 others after them (the shape where
the probe of the newest entries finds none).  LangGraph's ``SqliteStore`` holds
the same on its own file: a namespace of 100 items written last, and one
written first.  In CPU time of this thread, interleaved, each ratio the median
of the per-round ratios:

- ``query_memory({"keyPrefix": "q/", "limit": 100})`` on each agent against
  ``query_memory({"limit": 100})`` on the same agent (judged: at most 1x, "at
  least as fast as the plain query of the same page size");
- each of the three against ``search(ns, limit=100)`` on the matching
  namespace (the plain query against the recent one's), shown.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rotifer.memory import Category, MemoryStore
from rotifer.memory.storage.backend import Row

from . import memory, peer
from .report import Result, render
from .timing import Settings, compare_paired

ENTRIES = 10_000
SIZE = 100
QUERY = {"keyPrefix": "q/", "limit": 100}
PLAIN = {"limit": 100}


def _old_rows(agent: str, entries: int) -> Iterator[Row]:
    """The 100 ``q/`` keys first, then the rest (filler)."""
    n = itertools.count(1)
    value, small = os.urandom(SIZE), os.urandom(memory.FILLER_BYTES)
    for i in range(min(memory.QUERY_ROWS, entries)):
        yield memory.make_row(agent, f"q/{i:03d}", value, Category.PATTERN, next(n))
    for i in range(max(entries - memory.QUERY_ROWS, 0)):
        yield memory.make_row(agent, f"f/{i:07d}", small, Category.CONTEXT, next(n))


def _lg_fill(store: Any, entries: int) -> None:
    from langgraph.store.base import PutOp

    text, small = "x" * SIZE, "y" * memory.FILLER_BYTES
    filler = max(entries - memory.QUERY_ROWS, 0)
    ops = [PutOp(("old", "q"), f"{i:03d}", {"v": text}) for i in range(memory.QUERY_ROWS)]
    ops += [PutOp(("old", "f"), f"{i:07d}", {"v": small}) for i in range(filler)]
    ops += [PutOp(("recent", "f"), f"{i:07d}", {"v": small}) for i in range(filler)]
    ops += [PutOp(("recent", "q"), f"{i:03d}", {"v": text}) for i in range(memory.QUERY_ROWS)]
    for start in range(0, len(ops), 1000):
        store.batch(ops[start:start + 1000])


def run_results(root: Path, settings: Settings) -> list[Result]:
    root.mkdir(parents=True, exist_ok=True)
    entries = min(ENTRIES, max(settings.scales))
    store = MemoryStore.open(root / "rotifer")
    backend = store.backend
    memory.populate(backend, "recent",  # type: ignore[arg-type]
                    memory.standard_rows("recent", entries, SIZE, 0))
    memory.populate(backend, "old", _old_rows("old", entries))  # type: ignore[arg-type]
    have_lg = peer.available()
    lg = conn = None
    if have_lg:
        lg, conn = peer._lg_store(root / "langgraph.db")
        _lg_fill(lg, entries)
    results: list[Result] = []
    group = f"key prefix, {entries:,} entries of {SIZE} B"
    try:
        recent = store.for_gene("recent", memory.GENE, memory.DOMAIN)
        old = store.for_gene("old", memory.GENE, memory.DOMAIN)
        ops: dict[str, Any] = {
            "recent plain": lambda: recent.query_memory(PLAIN),
            "recent prefix": lambda: recent.query_memory(QUERY),
            "old plain": lambda: old.query_memory(PLAIN),
            "old prefix": lambda: old.query_memory(QUERY),
        }
        for name in ("recent prefix", "old prefix"):
            assert [e.key for e in ops[name]()] == [f"q/{i:03d}" for i in range(99, -1, -1)][
                :min(100, entries)], name
        if lg is not None:
            ops["search recent"] = lambda: lg.search(("recent", "q"), limit=100)
            ops["search old"] = lambda: lg.search(("old", "q"), limit=100)
            assert len(ops["search old"]()) == len(ops["search recent"]()) == min(100, entries)
        iters = max(1, settings.iters // 4)
        for shape in ("recent", "old"):
            t, r = compare_paired(ops, f"{shape} plain", rounds=settings.rounds, iters=iters)
            matches = "100 recent matches" if shape == "recent" else "100 old matches"
            results.append(Result(
                group, f"query_memory keyPrefix, {matches} / plain query of 100",
                t[f"{shape} prefix"], t[f"{shape} plain"], "the plain query, same agent", "max",
                1.0, r[f"{shape} prefix"]))
            if have_lg:
                search = t[f"search {shape}"]
                results.append(Result(
                    group, f"search / query_memory keyPrefix, {matches}", t[f"{shape} prefix"],
                    search, "search, matching namespace", "info", None,
                    r[f"search {shape}"] / r[f"{shape} prefix"]))
                if shape == "recent":
                    results.append(Result(
                        group, "search / query_memory, plain query of 100", t["recent plain"],
                        search, "search, matching namespace", "info", None,
                        r["search recent"]))
    finally:
        if conn is not None:
            conn.close()
        store.close()
    return results


def table(root: Path, settings: Settings) -> str:
    return render(run_results(root, settings)) + (
        "\nCPU time of this thread per call (`time.thread_time`), medians of "
        f"{settings.rounds} interleaved rounds; each ratio is the median of the per-round "
        "ratios (paired); the `search /` rows are LangGraph's time over rotifer's (above 1: "
        f"rotifer is faster); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
        "CPUs when the run ended.\n")
