"""A page costs a page (issue 32): ``search(ns, limit=10)`` on rotifer's
LangGraph store against LangGraph's ``SqliteStore``, at 2,000 and 100,000
items of 100 B and 10 KiB, all in the namespace searched; plus the same search
at ``offset=1990`` and with a filter only every tenth item matches; and
``list_namespaces(limit=1)`` over the same items (one namespace: what it
costs is reading the namespaces, not the items).

Each store is filled with the same items (``SqliteStore`` in its own file,
WAL, ``synchronous=NORMAL``; ``RotiferStore`` as one gene on an SQLite
``MemoryStore``, every item an audited write).  Times are **CPU time** of this
process per call, medians of interleaved rounds (:func:`bench.timing.compare`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from rotifer.memory import MemoryStore

from . import memory
from .report import format_seconds
from .timing import Settings, compare


def _scales(settings: Settings) -> tuple[int, ...]:
    if max(settings.scales) >= 100_000:
        return (2_000, 100_000)
    return (2_000,) if max(settings.scales) >= 10_000 else (200,)


def _fill(stores: list[Any], items: int, size: int) -> None:
    from langgraph.store.base import PutOp

    text = "x" * size
    for start in range(0, items, 500):
        ops = [PutOp(("docs",), f"k{i:06d}", {"v": text, "n": i % 10})
               for i in range(start, min(items, start + 500))]
        for store in stores:
            store.batch(ops)


def table(root: Path, settings: Settings) -> str:
    from . import adapter

    if not adapter.available():
        return "LangGraph is not installed (`pip install -e '.[langgraph,bench]'`): no figures.\n"
    from langgraph.store.sqlite import SqliteStore

    from rotifer.langgraph import RotiferStore

    lines = ["| items | call | RotiferStore | SqliteStore | ÷ SqliteStore |",
             "|---|---|---:|---:|---:|"]
    for size in settings.sizes:
        for items in _scales(settings):
            where = root / f"pages-{size}-{items}"
            where.mkdir(parents=True, exist_ok=True)
            mem = MemoryStore.open(where / "rotifer")
            conn = memory.raw_connection(where / "langgraph.db")
            try:
                lite = SqliteStore(conn)
                lite.setup()
                mem.create_agent("lg", quota_bytes=memory.BIG_QUOTA)
                ours = RotiferStore.for_gene(mem, "lg", memory.GENE, memory.DOMAIN)
                _fill([ours, lite], items, size)
                deep = min(1990, items - 10)  # the last page of 2,000 (of a tiny run's items)
                calls: dict[str, tuple[dict[str, Any], int]] = {
                    "limit=10": ({}, 10),
                    f"limit=10, offset={deep}": ({"offset": deep}, 10),
                    "limit=10, filter 1 in 10": ({"filter": {"n": 3}}, 10),
                }
                runs: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
                    name: (partial(ours.search, ("docs",), limit=limit, **extra),
                           partial(lite.search, ("docs",), limit=limit, **extra))
                    for name, (extra, limit) in calls.items()}
                runs["list_namespaces(limit=1)"] = (partial(ours.list_namespaces, limit=1),
                                                    partial(lite.list_namespaces, limit=1))
                for name, (mine, theirs) in runs.items():
                    a, b = mine(), theirs()
                    assert len(a) == len(b), name  # (a batch's items tie in SqliteStore's order)
                    t = compare({"ours": mine, "lite": theirs}, rounds=settings.rounds,
                                iters=max(1, settings.iters // 4), clock=time.process_time)
                    lines.append(f"| {items:,} × {memory.size_label(size)} | {name} | "
                                 f"{format_seconds(t['ours'])} | {format_seconds(t['lite'])} | "
                                 f"{t['ours'] / t['lite']:.2f}× |")
            finally:
                conn.close()
                mem.close()
    lines += ["", "CPU time of the bench process per call (`time.process_time`), medians of "
              "interleaved rounds; both stores answer full pages (SqliteStore gives the items of one batch one timestamp, so their order is not compared)."]
    return "\n".join(lines) + "\n"
