"""Issue 24, targets 1 and 2: the lean paths against the floor, the full paths
and LangGraph's ``SqliteStore``, in CPU time (``time.thread_time``), A/B
interleaved in one run, each ratio the median of per-round ratios.

On one SQLite file of 10,000 entries per value size (the peer suite's data;
LangGraph on its own file, same settings):

- **the floor** of a write: the very statements ``write_memory`` runs, on a raw
  ``sqlite3`` connection to the same file -- ``BEGIN IMMEDIATE``, the lookup,
  the upsert, then the same chained audit append (``AuditLog.write`` of a line
  of the same length on its own log), the line's history-index row (with the
  line's SHA-256, as the store commits it since issue 31), the agent's
  counters, ``COMMIT`` -- with no rules and no entry built (its own agent,
  filled like the store's);
- ``write_memory`` (an update), ``read_memory`` (by the writer) and
  ``query_memory({"keyPrefix": "q/", "limit": 100})`` on the lean paths, the
  same on the full paths (``MemoryStore.lean_paths`` off, the same store);
- LangGraph ``put``/``get``/``search(ns, limit=100)``;
- the floors of a read and a query (shown, not judged): the very statement the
  lean path runs (``read_sql``; the first page of the ``q/`` prefix as
  ``iter_newest_rows`` runs it), on a raw ``sqlite3`` connection to the same
  file, its rows fetched and nothing built from them.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from rotifer.memory import AuditLog, MemoryStore
from rotifer.memory.audit.index import key_hash
from rotifer.memory.storage.sqlite import SqliteBackend
from rotifer.memory.storage.sqlite.transaction import INDEX_INSERT, PUT_SQL, SqliteTransaction

from . import memory, peer
from .report import Result, render
from .timing import Settings, compare_paired

ENTRIES = 10_000
UPDATE_AGENT = ("UPDATE memory_agents SET used_bytes = ?, next_seq = ?, last_us = ?, head = ? "
                "WHERE agent_id = ?")


def _floor_write(db: Path, log: AuditLog, agent: str, value: bytes):  # type: ignore[no-untyped-def]
    """The floor of one write (see the module docstring)."""
    conn = memory.raw_connection(db)
    numbers = itertools.count(10**9)
    row = memory.make_row(agent, "w/key", value, memory.Category.PATTERN, 1)
    params = list(memory.row_params(row))
    size = row.size
    hashed = key_hash("w/key")

    def write() -> None:
        n = next(numbers)
        params[9], params[15] = n, n  # updated_us, seq
        line = {"ts": "2026-01-01T00:00:00.000000Z", "agent": agent, "action": "update",
                "key": "w/key", "category": "PATTERN", "actor": memory.GENE, "bytes": size,
                "entryId": "e" * 64, "previousBytes": size, "epoch": "0123456789ab", "seq": n}
        text = ('{"ts":"2026-01-01T00:00:00.000000Z","agent":"' + agent + '","action":"update",'
                '"key":"w/key","category":"PATTERN","actor":"' + memory.GENE + '","bytes":'
                + str(size) + ',"entryId":"' + "e" * 64 + '","previousBytes":' + str(size)
                + ',"epoch":"0123456789ab","seq":' + str(n) + "}")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(SqliteTransaction.sql.lookup, (n, "w/key", agent)).fetchone()
        conn.execute(PUT_SQL, params)
        head = log.write([line], [text])
        # Its index row: a file number of its own per write keeps the key new.
        conn.execute(INDEX_INSERT, (agent, n, 0, len(text) + 80, n, "0123456789ab", n, "update",
                                    hashed, "PATTERN", size, bytes.fromhex(head)))
        conn.execute(UPDATE_AGENT, (0, n + 1, n, head, agent))
        conn.execute("COMMIT")
    return write


def _floor_read(db: Path, agent: str):  # type: ignore[no-untyped-def]
    """The lean read's statement alone, on raw sqlite3."""
    conn = memory.raw_connection(db)
    sql = SqliteTransaction.sql.read
    return lambda: conn.execute(sql, (1, "r/key", agent)).fetchone()


def _floor_query(store: MemoryStore, db: Path, agent: str):  # type: ignore[no-untyped-def]
    """The lean query's statements (the "has anything expired?" lookup and the
    first page, as the store traced them) alone, on raw sqlite3."""
    statements: list[str] = []
    backend = store.backend
    assert isinstance(backend, SqliteBackend)
    store.lean_paths = True
    mem = store.for_gene(agent, memory.GENE, memory.DOMAIN)
    backend.conn.set_trace_callback(statements.append)
    try:
        mem.query_memory({"keyPrefix": "q/", "limit": 100})
    finally:
        backend.conn.set_trace_callback(None)
    assert len(statements) == 2, statements  # the lookup and one page
    conn = memory.raw_connection(db)
    return lambda: [conn.execute(sql).fetchall() for sql in statements]


def run_results(root: Path, settings: Settings) -> list[Result]:
    root.mkdir(parents=True, exist_ok=True)
    entries = min(ENTRIES, max(settings.scales))
    store = MemoryStore.open(root / "rotifer")
    have_lg = peer.available()
    lg = conn = None
    if have_lg:
        lg, conn = peer._lg_store(root / "langgraph.db")
    floor_log = AuditLog(root / "floor.jsonl")
    results: list[Result] = []
    rounds = settings.rounds
    try:
        for size in settings.sizes:
            agent, floor_agent = f"agent-{size}", f"floor-{size}"
            for name in (agent, floor_agent):
                memory.populate(store.backend,  # type: ignore[arg-type]
                                name, memory.standard_rows(name, entries, size, 0))
            mem = store.for_gene(agent, memory.GENE, memory.DOMAIN)
            value = os.urandom(size)
            label = memory.size_label(size)
            group = f"lean paths, {entries:,} entries"
            floor = _floor_write(root / "rotifer" / "playground.db", floor_log, floor_agent,
                                 value)

            def lean(call):  # type: ignore[no-untyped-def]
                def op() -> object:
                    store.lean_paths = True
                    return call()
                return op

            def full(call):  # type: ignore[no-untyped-def]
                def op() -> object:
                    store.lean_paths = False
                    return call()
                return op

            def write() -> object:
                return mem.write_memory("w/key", value, "PATTERN")  # noqa: B023

            def read() -> object:
                return mem.read_memory("r/key")  # noqa: B023

            def query() -> object:
                return mem.query_memory({"keyPrefix": "q/", "limit": 100})  # noqa: B023

            ns: tuple[str, ...] = ("agent", f"s{size}")
            doc = {"v": "x" * size}
            if have_lg:
                peer._lg_populate(lg, entries, size)
            ops = {"floor": floor, "lean": lean(write), "full": full(write)}
            if have_lg:
                ops["put"] = lambda: lg.put((*ns, "w"), "key", doc)  # noqa: B023
            t, r = compare_paired(ops, "lean", rounds=rounds, iters=settings.iters)
            results.append(Result(group, f"write_memory {label} (update), lean", t["lean"],
                                  t["floor"], "floor: same statements + same append and index row", "max",
                                  1.75 if size < 1024 else 1.6, 1 / r["floor"]))
            results.append(Result(group, f"write_memory {label} (update), lean", t["lean"],
                                  t["full"], "the full path", "info", None, 1 / r["full"]))
            if have_lg:
                results.append(Result(group, f"put / write_memory {label}, lean", t["lean"],
                                      t["put"], "put", "min", 0.55 if size < 1024 else 0.8,
                                      1 / r["put"]))
            if have_lg:
                assert len(lg.search((*ns, "q"), limit=100)) == min(memory.QUERY_ROWS, entries)
            db = root / "rotifer" / "playground.db"
            ops = {"lean": lean(read), "full": full(read), "floor": _floor_read(db, agent)}
            if have_lg:
                ops["get"] = lambda: lg.get((*ns, "r"), "key")  # noqa: B023
            t, r = compare_paired(ops, "lean", rounds=rounds, iters=settings.iters)
            results.append(Result(group, f"read_memory {label}, lean", t["lean"], t["full"],
                                  "the full path", "info", None, 1 / r["full"]))
            results.append(Result(group, f"read_memory {label}, lean", t["lean"], t["floor"],
                                  "floor: its statement on raw sqlite3", "info", None,
                                  1 / r["floor"]))
            if have_lg:
                results.append(Result(group, f"get / read_memory {label}, lean", t["lean"],
                                      t["get"], "get", "min", 1.35, 1 / r["get"]))
            ops = {"lean": lean(query), "full": full(query), "floor": _floor_query(store, db, agent)}
            if have_lg:
                ops["search"] = lambda: lg.search((*ns, "q"), limit=100)  # noqa: B023
            t, r = compare_paired(ops, "lean", rounds=rounds, iters=max(1, settings.iters // 4))
            results.append(Result(group, f"query_memory 100 × {label}, lean", t["lean"],
                                  t["full"], "the full path", "info", None, 1 / r["full"]))
            results.append(Result(group, f"query_memory 100 × {label}, lean", t["lean"],
                                  t["floor"], "floor: its statements on raw sqlite3", "info",
                                  None, 1 / r["floor"]))
            if have_lg:
                results.append(Result(group, f"search / query_memory 100 × {label}, lean",
                                      t["lean"], t["search"], "search", "min",
                                      1.0 if size < 1024 else 1.2, 1 / r["search"]))
    finally:
        store.lean_paths = True
        if conn is not None:
            conn.close()
        floor_log.close()
        store.close()
    return results


def table(root: Path, settings: Settings) -> str:
    return render(run_results(root, settings)) + (
        "\nCPU time of this thread per call (`time.thread_time`), medians of "
        f"{settings.rounds} interleaved rounds; each ratio is the median of the per-round "
        "ratios (paired), `min` rows LangGraph's time over rotifer's; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs when the run ended.\n")
