"""rotifer's LangGraph store (``rotifer.langgraph.RotiferStore``) against
LangGraph's own ``SqliteStore`` and ``InMemoryStore``, on the same data.

Each store holds the same items: ``("users", "uNN")`` namespaces of 100 items
each, values ``{"v": TEXT, "n": I}`` with TEXT of the row's size; 10,000 items
of 100 B and 1,000 of 10 KiB.  ``SqliteStore`` gets its own file with the
store's settings (WAL, ``synchronous=NORMAL``); ``RotiferStore`` acts as one
gene on an agent of an SQLite ``MemoryStore`` (filled through the adapter
itself, so every item is an audited write).  Measured: ``put`` (an update of
an existing item), ``get``, ``search(ns, limit=100)`` of one namespace, and
``search`` with a filter (``{"n": {"$gte": ...}}``, 10 of the namespace's 100
match).  One more column is the memory call under the adapter on the same
entry (``write_memory``, ``read_memory``, ``query_memory``): the adapter's own
cost is the difference.

Times are **CPU time** of this process per call (``time.process_time``), the
median of interleaved rounds (:func:`bench.timing.compare`): on a loaded,
shared machine wall-clock medians move with the load, CPU time much less.
SQLite in WAL with ``synchronous=NORMAL`` does not wait on the disk at a
commit, so CPU time is nearly all of each call here.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rotifer.memory import MemoryStore

from . import memory
from .report import format_seconds
from .timing import Settings, compare

ITEMS = {100: 10_000, 10 * 1024: 1_000}
PER_NAMESPACE = 100


def available() -> bool:
    try:
        import langgraph.store.sqlite  # noqa: F401

        import rotifer.langgraph  # noqa: F401
    except ImportError:
        return False
    return True


def _fill(stores: list[Any], items: int, size: int) -> None:
    from langgraph.store.base import PutOp

    text = "x" * size
    ops = [PutOp(("users", f"u{i // PER_NAMESPACE:03d}"), f"k{i % PER_NAMESPACE:03d}",
                 {"v": text, "n": i % PER_NAMESPACE}) for i in range(items)]
    for store in stores:
        for start in range(0, len(ops), 500):
            store.batch(ops[start:start + 500])


def _rows(root: Path, settings: Settings) -> list[tuple[str, dict[str, float]]]:
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.sqlite import SqliteStore

    from rotifer.langgraph import RotiferStore

    rows: list[tuple[str, dict[str, float]]] = []
    root.mkdir(parents=True, exist_ok=True)
    mem = MemoryStore.open(root / "rotifer")
    conn = memory.raw_connection(root / "langgraph.db")
    try:
        lite = SqliteStore(conn)
        lite.setup()
        for size in settings.sizes:
            items = min(ITEMS.get(size, 1_000), max(settings.scales))
            agent = f"lg-{size}"
            mem.create_agent(agent, quota_bytes=memory.BIG_QUOTA)
            ours = RotiferStore.for_gene(mem, agent, memory.GENE, memory.DOMAIN)
            gene = mem.for_gene(agent, memory.GENE, memory.DOMAIN)
            plain = InMemoryStore()
            ns_base = ("s", str(size))  # one SqliteStore file holds both sizes apart
            _fill([ours, plain, _Prefixed(lite, ns_base)], items, size)
            ns, key = ("users", "u000"), "k007"
            lite_ns = _Prefixed.map(ns_base, ns)
            value = {"v": "x" * size, "n": 7}
            entry_key = "langgraph/users/u000/k007"
            entry = gene.read_memory(entry_key)
            assert entry is not None and ours.get(ns, key) is not None
            entry_bytes = entry.value
            label = memory.size_label(size)
            count = min(PER_NAMESPACE, items)
            assert len(ours.search(ns, limit=100)) == count == len(plain.search(ns, limit=100)) \
                == len(lite.search(lite_ns, limit=100))
            filt = {"n": {"$gte": count - 10}}
            calls = {
                f"put {label} (update)": {
                    "RotiferStore": lambda: ours.put(ns, key, value),  # noqa: B023
                    "SqliteStore": lambda: lite.put(lite_ns, key, value),  # noqa: B023
                    "InMemoryStore": lambda: plain.put(ns, key, value),  # noqa: B023
                    "memory call": lambda: gene.write_memory(  # noqa: B023
                        entry_key, entry_bytes, "CONTEXT"),  # noqa: B023
                },
                f"get {label}": {
                    "RotiferStore": lambda: ours.get(ns, key),  # noqa: B023
                    "SqliteStore": lambda: lite.get(lite_ns, key),  # noqa: B023
                    "InMemoryStore": lambda: plain.get(ns, key),  # noqa: B023
                    "memory call": lambda: gene.read_memory(entry_key),  # noqa: B023
                },
                f"search 100 × {label}": {
                    "RotiferStore": lambda: ours.search(ns, limit=100),  # noqa: B023
                    "SqliteStore": lambda: lite.search(lite_ns, limit=100),  # noqa: B023
                    "InMemoryStore": lambda: plain.search(ns, limit=100),  # noqa: B023
                    "memory call": lambda: gene.query_memory(  # noqa: B023
                        {"keyPrefix": "langgraph/users/u000/", "limit": 100}),
                },
                f"search, filter matching 10 of 100 × {label}": {
                    "RotiferStore": lambda: ours.search(ns, filter=filt, limit=100),  # noqa: B023
                    "SqliteStore": lambda: lite.search(
                        lite_ns, filter=filt, limit=100),  # noqa: B023
                    "InMemoryStore": lambda: plain.search(  # noqa: B023
                        ns, filter=filt, limit=100),  # noqa: B023
                },
            }
            for name, ops in calls.items():
                iters = settings.iters if name.startswith(("put", "get")) else \
                    max(1, settings.iters // 4)
                rows.append((f"{name}, {items:,} items",
                             compare(ops, rounds=settings.rounds, iters=iters,
                                     clock=time.process_time)))
    finally:
        conn.close()
        mem.close()
    return rows


class _Prefixed:
    """A store whose namespaces get two more labels after the first (so one
    SqliteStore file holds each size's items apart)."""

    def __init__(self, store: Any, extra: tuple[str, ...]) -> None:
        self.store = store
        self.extra = extra

    @staticmethod
    def map(extra: tuple[str, ...], ns: tuple[str, ...]) -> tuple[str, ...]:
        return (ns[0], *extra, *ns[1:])

    def batch(self, ops: list[Any]) -> None:
        self.store.batch([op._replace(namespace=self.map(self.extra, op.namespace))
                          for op in ops])


def run(root: Path, settings: Settings) -> str:
    if not available():
        return ("LangGraph is not installed (`pip install -e '.[langgraph,bench]'`): "
                "no figures.\n")
    lines = [
        "| operation | RotiferStore | SqliteStore | InMemoryStore | ÷ SqliteStore "
        "| ÷ InMemoryStore | memory call under it |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in _rows(root, settings):
        ours = t["RotiferStore"]
        bare = t.get("memory call")
        lines.append(
            f"| {name} | {format_seconds(ours)} | {format_seconds(t['SqliteStore'])} | "
            f"{format_seconds(t['InMemoryStore'])} | {ours / t['SqliteStore']:.2f}× | "
            f"{ours / t['InMemoryStore']:.0f}× | "
            f"{'–' if bare is None else format_seconds(bare)} |")
    lines.append("")
    lines.append("CPU time of the bench process per call (`time.process_time`), medians "
                 "of interleaved rounds; ÷ is RotiferStore's time over the other store's.")
    return "\n".join(lines) + "\n"
