"""rotifer on PostgreSQL against LangGraph's ``PostgresStore`` (issue 24, target 5),
and writes per second with several worker processes.

Both stores live on one throwaway server (:mod:`.pgserver`, ``fsync=off``), each
in its own database, with the same data as :mod:`.peer`: 10,000 entries of 100 B
(filler, the 100 rows a query returns, a read and a write target).  rotifer's
agent is filled with one ``INSERT ... SELECT`` (as the scaling suite does),
LangGraph's through its own ``batch`` of puts.  Calls, timed in wall-clock time
(the server's work is part of each call) in interleaved rounds:

- ``put(ns, key, value)`` against ``write_memory`` (an update);
- ``get(ns, key)`` against ``read_memory`` by the gene that wrote it;
- ``search(ns, limit=100)`` over a namespace of 100 items against
  ``query_memory({"keyPrefix": "q/", "limit": 100})``.

Round trips and statements per call are counted on the wire for both
(:mod:`.wire`), after 8 warm-up calls.  Then ``write_memory`` of new 100 B keys
by 1, 4 and 16 processes, all on one agent and spread over 16 agents.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rotifer.memory import MemoryStore

from .latency import BARRIER_TIMEOUT_S, run_workers
from .pgserver import MISSING, Server, find_bindir
from .report import format_seconds
from .scaling import _fill_postgres
from .timing import Settings, compare

GENE = "v2:" + "b" * 64
DOMAIN = "bench"
ENTRIES = 10_000
WARM, COUNTED = 8, 10
WORKER_AGENTS = 16

Op = Callable[[], object]


def _langgraph(url: str) -> Any:
    from langgraph.store.postgres import PostgresStore

    return PostgresStore.from_conn_string(url)


def _lg_fill(store: Any) -> None:
    from langgraph.store.base import PutOp

    store.setup()
    small, text = "y" * 100, "x" * 100
    ops = [PutOp(("agent", "f"), f"{i:07d}", {"v": small}) for i in range(ENTRIES)]
    ops += [PutOp(("agent", "q"), f"{i:03d}", {"v": text}) for i in range(100)]
    ops += [PutOp(("agent", "r"), "key", {"v": text}), PutOp(("agent", "w"), "key", {"v": text})]
    for start in range(0, len(ops), 1000):
        store.batch(ops[start:start + 1000])


def _ops(store: MemoryStore, lg: Any) -> dict[str, tuple[Op, Op]]:
    """(LangGraph, rotifer) per comparison."""
    agent = f"agent-{ENTRIES}"
    mem = store.for_gene(agent, GENE, DOMAIN)
    value, text = os.urandom(100), {"v": "x" * 100}
    mem.write_memory("r/key", value, "PATTERN")
    return {
        "put / write_memory 100 B (update)": (
            lambda: lg.put(("agent", "w"), "key", text),
            lambda: mem.write_memory("w/key", value, "PATTERN")),
        "get / read_memory 100 B": (
            lambda: lg.get(("agent", "r"), "key"),
            lambda: mem.read_memory("r/key")),
        "search / query_memory 100 × 100 B": (
            lambda: lg.search(("agent", "q"), limit=100),
            lambda: mem.query_memory({"keyPrefix": "q/", "limit": 100})),
    }


def _counted(relay: Any, op: Op) -> tuple[float, float]:
    for _ in range(WARM):
        op()
    trips0, stmts0, _ = relay.snapshot()
    for _ in range(COUNTED):
        op()
    trips, stmts, _ = relay.snapshot()
    return (trips - trips0) / COUNTED, (stmts - stmts0) / COUNTED


def _round_trips(root: Path, server: Server, ours: str, theirs: str
                 ) -> dict[str, tuple[tuple[float, float], tuple[float, float]]]:
    from .wire import Relay

    relay = Relay(server.port)
    port = f":{server.port}/"
    try:
        with MemoryStore.open(root / "count", ours.replace(port, f":{relay.port}/")) as store, \
                _langgraph(theirs.replace(port, f":{relay.port}/")) as lg:
            return {name: (_counted(relay, pair[0]), _counted(relay, pair[1]))
                    for name, pair in _ops(store, lg).items()}
    finally:
        relay.close()


def writer(rotifer_dir: str, url: str, agent: str, index: int, loops: int, barrier: Any,
           out: str) -> None:
    """One process: ``loops`` writes of new 100 B keys to ``agent``, after the others are ready."""
    with MemoryStore.open(Path(rotifer_dir), url) as store:
        mem = store.for_gene(agent, GENE, DOMAIN)
        value = os.urandom(100)
        mem.write_memory(f"w{index:02d}/warm", value, "PATTERN")
        barrier.wait(BARRIER_TIMEOUT_S)
        start = time.perf_counter_ns()
        for n in range(loops):
            mem.write_memory(f"w{index:02d}/{n:06d}", value, "PATTERN")
        end = time.perf_counter_ns()
    Path(out).write_text(json.dumps({"start": start, "end": end}))


def _writes_per_second(root: Path, url: str, procs: int, agents: int, loops: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(procs)
    outs = [root / f"writer-{procs}-{agents}-{i}.json" for i in range(procs)]
    workers = [ctx.Process(target=writer, args=(str(root / "rotifer"), url,
                                                f"writers-{i % agents}", i, loops, barrier,
                                                str(out)), daemon=True)
               for i, out in enumerate(outs)]
    parts = run_workers(workers, outs, "peer_pg")
    wall = (max(p["end"] for p in parts) - min(p["start"] for p in parts)) / 1e9
    return procs * loops / wall


def table(root: Path, settings: Settings) -> str:
    """The comparison and throughput tables (markdown)."""
    root.mkdir(parents=True, exist_ok=True)
    bindir = find_bindir()
    if bindir is None:
        return MISSING + ".\n"
    with Server(bindir) as server:
        ours, theirs = server.database("rotifer_bench"), server.database("langgraph")
        with MemoryStore.open(root / "rotifer", ours) as store, _langgraph(theirs) as lg:
            _fill_postgres(ours, store, ENTRIES)
            _lg_fill(lg)
            times = {name: compare({"langgraph": pair[0], "rotifer": pair[1]},
                                   rounds=settings.rounds, iters=settings.iters)
                     for name, pair in _ops(store, lg).items()}
            for i in range(WORKER_AGENTS):
                store.create_agent(f"writers-{i}", 1 << 40)
        trips = _round_trips(root, server, ours, theirs)
        loops = max(settings.loops // 2, 2)
        rates = {(procs, agents): _writes_per_second(root, ours, procs, agents, loops)
                 for procs in settings.procs for agents in (1, WORKER_AGENTS)}
        version = server.version
    lines = ["| call | rotifer | LangGraph PostgresStore | speed (LangGraph time / rotifer's) "
             "| round trips (statements), rotifer | round trips (statements), LangGraph |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, t in times.items():
        (lt, ls), (rt, rs) = trips[name]
        lines.append(f"| {name} | {format_seconds(t['rotifer'])} | "
                     f"{format_seconds(t['langgraph'])} | {t['langgraph'] / t['rotifer']:.2f}× "
                     f"| {rt:g} ({rs:g}) | {lt:g} ({ls:g}) |")
    lines += ["", "| writer processes | write_memory/s, one agent | write_memory/s, "
              f"spread over {WORKER_AGENTS} agents |", "|---:|---:|---:|"]
    for procs in settings.procs:
        lines.append(f"| {procs} | {rates[(procs, 1)]:,.0f} | "
                     f"{rates[(procs, WORKER_AGENTS)]:,.0f} |")
    load = os.getloadavg()[0]
    return ("\n".join(lines) + f"\n\nPostgreSQL {version} (`fsync=off`, `synchronous_commit=off`), "
            f"both stores on it, reached directly; wall-clock medians of {settings.rounds} "
            f"interleaved rounds of {settings.iters} calls; {WARM} warm-up calls, then "
            f"{COUNTED} counted on the wire; {loops} writes per process; load average "
            f"{load:.1f} on {os.cpu_count()} CPUs when the run ended.\n")

