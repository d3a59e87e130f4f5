"""Latency under concurrency: p50 and p99 of the four calls, N processes, one agent.

Each worker is its own process (``spawn``, so nothing is inherited from the
parent: no connections, no SQLite handles), opens the store itself, warms up,
and then waits on a barrier with the others so their loops overlap.  Every
loop is the four calls of the Memory API on ONE shared agent:

- ``write_memory`` of a new key (``p<worker>/<n>``, 100 B, PATTERN);
- ``read_memory`` of that key by the same gene (it changes nothing);
- ``query_memory({"keyPrefix": "q/", "limit": 100})`` over 100 entries of 100 B;
- ``delete_memory`` of the key.

Each call is timed on its own with ``time.perf_counter_ns``; the percentiles
are over all workers' calls of that kind (nearest rank).  ``calls/s`` is every
worker's calls over the wall time from the first loop's start to the last
one's end (``perf_counter`` is the system-wide monotonic clock on Linux, so the
workers' readings compare).  SQLite is a real file (WAL) in the bench's
temporary directory; PostgreSQL is a throwaway server the bench starts on
127.0.0.1 (:mod:`.pgserver`), reached directly, with the store's defaults.
The audit log is shared by all workers, as in one project.
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rotifer.memory import MemoryStore

from .pgserver import MISSING, Server, find_bindir
from .report import format_seconds
from .timing import Settings

AGENT = "latency"
GENE = "v2:" + "c" * 64
DOMAIN = "bench"
CALLS = ("write_memory", "read_memory", "query_memory", "delete_memory")
QUERY = {"keyPrefix": "q/", "limit": 100}
WARMUP_LOOPS = 3
BARRIER_TIMEOUT_S = 300.0


def prepare(rotifer_dir: Path, url: str) -> None:
    """The shared agent with the 100 entries every query returns."""
    with MemoryStore.open(rotifer_dir, url) as store:
        store.create_agent(AGENT, 1 << 30)
        mem = store.for_gene(AGENT, GENE, DOMAIN)
        value = os.urandom(100)
        for i in range(100):
            mem.write_memory(f"q/{i:03d}", value, "PATTERN")


def worker(rotifer_dir: str, url: str, index: int, loops: int, barrier: Any, out: str) -> None:
    """One process: warm up, wait for the others, time ``loops`` rounds of the four calls."""
    with MemoryStore.open(Path(rotifer_dir), url) as store:
        mem = store.for_gene(AGENT, GENE, DOMAIN)
        value = os.urandom(100)
        times: dict[str, list[int]] = {name: [] for name in CALLS}
        clock = time.perf_counter_ns

        def loop(n: int, record: bool) -> None:
            key = f"p{index:02d}/{n:06d}"
            t0 = clock()
            mem.write_memory(key, value, "PATTERN")
            t1 = clock()
            mem.read_memory(key)
            t2 = clock()
            mem.query_memory(QUERY)
            t3 = clock()
            mem.delete_memory(key)
            t4 = clock()
            if record:
                for name, a, b in zip(CALLS, (t0, t1, t2, t3), (t1, t2, t3, t4), strict=True):
                    times[name].append(b - a)

        for n in range(WARMUP_LOOPS):
            loop(n, record=False)
        barrier.wait(BARRIER_TIMEOUT_S)
        start = clock()
        for n in range(WARMUP_LOOPS, WARMUP_LOOPS + loops):
            loop(n, record=True)
        end = clock()
    Path(out).write_text(json.dumps({"start": start, "end": end, "times": times}))


def percentile(sorted_ns: Sequence[int], q: float) -> float:
    """Nearest-rank percentile, in seconds."""
    rank = max(1, math.ceil(q * len(sorted_ns)))
    return sorted_ns[rank - 1] / 1e9


@dataclass(frozen=True)
class Row:
    backend: str
    procs: int
    p50: dict[str, float]
    p99: dict[str, float]
    calls_per_s: float
    samples: int  # calls of each kind


def run_workers(workers: Sequence[Any], outs: Sequence[Path], what: str
                ) -> list[dict[str, Any]]:
    """Start the worker processes, wait for them, and read what each wrote."""
    for w in workers:
        w.start()
    for w in workers:
        w.join(BARRIER_TIMEOUT_S + 600)
    failed = [w.exitcode for w in workers if w.exitcode != 0]
    if failed:
        raise RuntimeError(f"{what}: {len(failed)} of {len(workers)} workers failed ({failed})")
    return [json.loads(out.read_text()) for out in outs]


def run_procs(root: Path, url: str, procs: int, loops: int) -> Row:
    """``procs`` workers on the agent prepared under ``root`` (the database at ``url``)."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(procs)
    outs = [root / f"worker-{procs}-{i}.json" for i in range(procs)]
    workers = [ctx.Process(target=worker, args=(str(root / "rotifer"), url, i, loops, barrier,
                                                str(out)), daemon=True)
               for i, out in enumerate(outs)]
    parts = run_workers(workers, outs, "latency")
    p50: dict[str, float] = {}
    p99: dict[str, float] = {}
    for name in CALLS:
        ns = sorted(t for part in parts for t in part["times"][name])
        p50[name], p99[name] = percentile(ns, 0.50), percentile(ns, 0.99)
    wall = (max(p["end"] for p in parts) - min(p["start"] for p in parts)) / 1e9
    return Row("", procs, p50, p99, len(CALLS) * loops * procs / wall, loops * procs)


def measure(root: Path, url: str, backend: str, settings: Settings) -> list[Row]:
    root.mkdir(parents=True, exist_ok=True)
    prepare(root / "rotifer", url)
    rows = []
    for procs in settings.procs:
        row = run_procs(root, url, procs, settings.loops)
        rows.append(Row(backend, procs, row.p50, row.p99, row.calls_per_s, row.samples))
    return rows


def render(rows: Sequence[Row], notes: Sequence[str] = ()) -> str:
    lines = ["| backend | processes | " + " | ".join(f"{c} p50 / p99" for c in CALLS)
             + " | calls/s, all processes |",
             "|---|---:|" + "---:|" * len(CALLS) + "---:|"]
    for r in rows:
        cells = [f"{format_seconds(r.p50[c])} / {format_seconds(r.p99[c])}" for c in CALLS]
        lines.append(f"| {r.backend} | {r.procs} | " + " | ".join(cells)
                     + f" | {r.calls_per_s:,.0f} |")
    text = "\n".join(lines) + "\n"
    for note in notes:
        text += f"\n{note}\n"
    return text


def run(root: Path, settings: Settings) -> str:
    """The latency table (markdown), SQLite then PostgreSQL."""
    rows = measure(root / "sqlite", f"sqlite:{root / 'sqlite' / 'latency.db'}", "SQLite",
                   settings)
    notes = []
    bindir = find_bindir()
    if bindir is None:
        notes.append(MISSING + ".")
    else:
        with Server(bindir) as server:
            rows += measure(root / "postgres", server.database("latency"), "PostgreSQL",
                            settings)
            notes.append(f"PostgreSQL {server.version} (`fsync=off`, "
                         "`synchronous_commit=off`), reached directly.")
    samples = settings.loops
    notes.insert(0, f"{samples} timed loops per process (after {WARMUP_LOOPS} untimed); "
                    "percentiles over all processes' calls.")
    return render(rows, notes)
