"""The console's history pages and ``audit show`` on a big shared log (issue 31, item 7).

A project log of ``lines`` audit lines (1,000,000 in a full run), a tenth of
them agent ``big``'s (real ``write_memory`` calls of a gene), 10 of them agent
``small``'s, the rest other agents' changes of 1,000 lines each, all
interleaved and all through the store's own append path (``log_change``: the
chained append, the history index's rows in the change's transaction), so the
log rolls over at the default 64 MiB as a busy project's does.  Then the real
console app in a real uvicorn on loopback serves the pages, fetched over HTTP:
p50 and p99 of the history page (the newest lines, as the page asks for them)
of the 10-line agent and of ``big``, and of ``big``'s chart.  For comparison,
``audit show --limit 50`` of ``big`` in process with the index and, once,
without it (the whole log read, as before the index); the chart drawn anew
beside the same chart drawn as before; ``audit verify`` of ``big`` reading the
whole log (and rebuilding its index) and then its own lines by the index; and
(:mod:`.history_pg`) ``audit verify`` of ``big`` on PostgreSQL, by its own lines
and ``--full``, on the same log built again with the memory there
(``ROTIFER_BENCH_HISTORY_PG=0`` leaves that out).  ``ROTIFER_BENCH_HISTORY_DIR``
names a folder (outside the repository) to keep the SQLite project in: the next
run reuses it instead of building the log again.

Targets (issue 31): the 10-line agent's history page p99 < 100 ms, ``big``'s
first page p99 < 200 ms, the chart < 500 ms.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.console.chart import BUCKETS, MARKS, STEP_MARKS, Point, series_of
from rotifer.console.server import settle
from rotifer.memory import MemoryStore
from rotifer.memory.audit.actions import CHART_ACTIONS, ENDS, REMOVES, SETS
from rotifer.memory.audit.history import audit_history, usage_steps
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.engine.changes import Change, log_change
from rotifer.memory.model import Category
from tests.console.helpers import Served

from . import history_pg
from .console import build as build_project
from .console import timed
from .timing import FULL, QUICK, Settings

LINES = {FULL: 1_000_000, QUICK: 100_000}
TINY_LINES = 20_000
#: Lines per change of the other agents.
BATCH = 1000
TARGETS_MS = {"small": 100.0, "big": 200.0, "chart": 500.0}
#: ``0``: leave out the PostgreSQL verify (:mod:`.history_pg`), which builds its log anew.
PG_ENV = "ROTIFER_BENCH_HISTORY_PG"


def _noise(store: MemoryStore, agent: str, n: int) -> None:
    """One change of ``n`` lines of ``agent`` through the real append path."""
    with store.backend.write(agent) as tx:
        record = tx.get_agent(agent)
        assert record is not None
        now = store.clock.now_us()
        change = Change(agent, now, "v2:" + "c" * 64, seq=record.next_seq, epoch=record.epoch)
        for i in range(n):
            change.line("write", f"cache/{record.next_seq:08d}/{i:04d}" + "x" * 60, None, 300)
        head = log_change(tx, store.audit, agent, record.next_seq, change.lines, change)
        tx.update_agent(agent, record.used_bytes, record.next_seq + 1, now, head)


def build(root: Path, total: int, url: str | None = None) -> Project:
    """The project and its log (see the module doc), its memory at ``url``
    (PostgreSQL) or in the project's SQLite file."""
    project = build_project(root, 0, url)  # agents "small" (10 entries) and "big" (none yet)
    big_lines = total // 10
    with project.open_store("big") as store:
        others = [f"other-{i}" for i in range(20)]
        for name in others:
            store.create_agent(name, quota_bytes=1 << 40)
        gene = project.registry().entries()
        gene_id = next(iter(gene))
        memory = store.for_gene("big", gene_id, "bench")
        value = os.urandom(100)
        categories = ("CACHE", "PATTERN", "CONTEXT", "PREFERENCE")
        written = noise = 0
        while written < big_lines or noise < total - big_lines - 10:
            for _ in range(9):
                if noise < total - big_lines - 10:
                    _noise(store, others[noise // BATCH % len(others)], BATCH)
                    noise += BATCH
            for _ in range(min(BATCH, big_lines - written)):
                memory.write_memory(f"k/{written % 5000:07d}", value, categories[written % 4])
                written += 1
    return project


def _before(db: Path, agent: str) -> list[Point]:
    """The chart as the console drew it before (for the ratio): the index rows
    with their action and category as text, and the state copied after every
    step, then the last copy of each time slice kept."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT ts_us, action, key_hash, category, nbytes FROM memory_audit_index "
            f"WHERE agent_id = ? AND action IN ({', '.join('?' * len(CHART_ACTIONS))}) "
            "ORDER BY file_no, off", (agent, *CHART_ACTIONS)).fetchall()
    finally:
        conn.close()
    steps = [(r[0], r[1], r[2], r[3], r[4]) for r in rows]
    order = list(Category)
    index = {c.value: n for n, c in enumerate(order)}
    sizes: dict[object, tuple[int, int]] = {}
    now = [0] * len(order)
    raw: list[tuple[int, tuple[int, ...]]] = []
    for at, action, key, text, size in steps:
        if action in ENDS:
            sizes.clear()
            now = [0] * len(order)
        elif action in SETS and key is not None:
            n = index.get(text) if isinstance(text, str) else None
            if n is None:
                continue
            old = sizes.get(key)
            if old is not None:
                now[old[0]] -= old[1]
            sizes[key] = (n, size)
            now[n] += size
        elif action in REMOVES and key is not None:
            gone = sizes.pop(key, None)
            if gone is not None:
                now[gone[0]] -= gone[1]
        else:
            continue
        raw.append((at, tuple(now)))
    [(s[0], MARKS[s[1]]) for s in steps if s[1] in MARKS]
    if len(raw) > BUCKETS:
        start, span = raw[0][0], max(raw[-1][0] - raw[0][0], 1)
        kept: dict[int, tuple[int, tuple[int, ...]]] = {}
        for point in raw:
            kept[min(BUCKETS - 1, (point[0] - start) * BUCKETS // span)] = point
        raw = list(kept.values())
    return [Point(at, dict(zip(order, values, strict=True))) for at, values in raw]


#: A folder to keep the built SQLite project in between runs (its log takes a
#: minute or more to build): reused when it holds one of the same size.  Never
#: inside the repository: the log is hundreds of megabytes.
KEEP_ENV = "ROTIFER_BENCH_HISTORY_DIR"


def _project(tmp: Path, total: int) -> tuple[Project, float, bool]:
    """The project (see :func:`build`), the seconds building it took, and whether
    it was kept from an earlier run (in the folder ``$ROTIFER_BENCH_HISTORY_DIR``
    names)."""
    kept = os.environ.get(KEEP_ENV)
    root = Path(kept) / f"project-{total}" if kept else tmp / "project"
    done = root / ".built"
    if done.exists():
        return Project.find(root), float(done.read_text()), True
    if root.exists():
        shutil.rmtree(root)  # a build that did not finish
    root.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    project = build(root, total)
    built_s = time.perf_counter() - start
    done.write_text(f"{built_s:.1f}\n")
    return project, built_s, False


def run(tmp: Path, settings: Settings) -> str:
    total = LINES.get(settings, TINY_LINES)
    project, built_s, kept = _project(tmp, total)
    built = f"built in {built_s:.0f} s" + (f" by an earlier run, kept by {KEEP_ENV}," if kept
                                             else "")
    log = project.dot / "audit.jsonl"
    files = [*sorted(project.dot.glob("audit.jsonl.*")), log]
    lines = sum(1 for f in files for _ in open(f, "rb"))  # noqa: SIM115
    size = sum(f.stat().st_size for f in files)
    count = max(20, settings.rounds * 5)
    served = Served(project)
    settle()  # as `rotifer console` does once it is ready (console/server.py)
    rows: dict[str, tuple[float, float]] = {}
    try:
        rows["history page, agent of 10 lines"] = timed(served, "/agents/small/history", count)
        rows["history page, first page of the 100,000-line agent"
             if total == 1_000_000 else "history page, first page of the big agent"] = \
            timed(served, "/agents/big/history", count)
        rows["chart of the big agent (kept until the agent changes)"] = timed(
            served, "/agents/big/history/chart", max(5, count // 4))
    finally:
        served.stop()
    with project.open_store("big", create=False) as store:
        anew, fetched, before = [], [], []
        for _ in range(7):  # what the first chart after a change costs: drawn anew
            t0 = time.perf_counter()
            steps = usage_steps(store, "big")
            t1 = time.perf_counter()
            drawn = series_of(steps, BUCKETS)
            [(step[0], STEP_MARKS[step[1]]) for step in steps if step[1] in STEP_MARKS]
            anew.append((time.perf_counter() - t0) * 1000)
            fetched.append((t1 - t0) * 1000)
            t2 = time.perf_counter()  # the same chart as the console drew it before
            assert _before(project.dot / "playground.db", "big") == drawn
            before.append((time.perf_counter() - t2) * 1000)
        anew.sort()
        fetched.sort()
        before.sort()
        load_chart = os.getloadavg()
        t0 = time.perf_counter()
        fast = list(audit_history(store, "big", limit=50))
        fast_ms = (time.perf_counter() - t0) * 1000
        with store.backend.write("big") as tx:  # forget the index: the whole log is read
            tx.set_indexed("big", "(none)", False)
        t0 = time.perf_counter()
        slow = list(audit_history(store, "big", limit=50))
        slow_ms = (time.perf_counter() - t0) * 1000
        assert fast == slow and len(fast) == 50
        # audit verify: with the index forgotten (above) it reads the whole log and
        # rebuilds the index; then the agent's own lines alone (see verify.from_index).
        t0 = time.perf_counter()
        rebuilt = verify_agent(store, "big")
        rebuilt_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        own = verify_agent(store, "big")
        own_s = time.perf_counter() - t0
        assert rebuilt.ok and own.ok and "history index" in own.message, own.message
        load_verify = os.getloadavg()
    with project.open_store("small", create=False) as store:
        t0 = time.perf_counter()  # 10 lines, written before almost all of the log
        small = verify_agent(store, "small")
        small_ms = (time.perf_counter() - t0) * 1000
        assert small.ok and "history index" in small.message, small.message
    big = Agents(project).get("big").name
    load = os.getloadavg()
    out = [f"A log of {lines:,} lines ({size / 1e6:.0f} MB in {len(files)} files, {built} "
           f"through the store's append path), of which {total // 10:,} are "
           f"agent `{big}`'s and 10 agent `small`'s; {count} requests per page (fewer for the "
           f"chart) over HTTP to the real console; milliseconds.  Load average during the "
           f"run: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (1/5/15 min) on "
           f"{os.cpu_count()} cores.", "",
           "| page | p50 | p99 | target (p99) |", "|---|---|---|---|"]
    for (label, (p50, p99)), target in zip(rows.items(), TARGETS_MS.values(), strict=True):
        out.append(f"| {label} | {p50:.1f} | {p99:.1f} | < {target:.0f} |")
    mid = len(anew) // 2
    out += ["", f"The chart drawn anew (the first request after a change of the agent), in "
            f"process, {len(steps):,} steps: {anew[mid]:.0f} ms median (of which "
            f"{fetched[mid]:.0f} ms reading the index rows), {anew[0]:.0f} ms the fastest and "
            f"{anew[-1]:.0f} ms the slowest of {len(anew)}; as the console drew it before "
            f"(each row's action and category as text, the state copied after every step), "
            f"interleaved: {before[mid]:.0f} ms median ({before[mid] / max(anew[mid], 0.001):.1f}x), "
            f"{before[0]:.0f} ms the fastest.  Load average then: "
            f"{load_chart[0]:.1f} / {load_chart[1]:.1f} / {load_chart[2]:.1f}."]
    out += ["", f"`audit show --limit 50` of the big agent in process: {fast_ms:.1f} ms with "
            f"the history index, {slow_ms:.0f} ms reading the whole log "
            f"({slow_ms / max(fast_ms, 0.001):.0f}x), the same 50 lines."]
    out += ["", f"`audit verify` of the big agent in process: {rebuilt_s:.1f} s reading the "
            f"whole log (its index forgotten: rebuilt), then {own_s:.2f} s reading its own "
            f"lines by the index ({rebuilt_s / max(own_s, 0.001):.0f}x); of agent `small` (10 "
            f"lines, then the whole log written after them, searched for 16 MiB for a change "
            f"that never committed): {small_ms:.0f} ms.  Load average then: "
            f"{load_verify[0]:.1f} / {load_verify[1]:.1f} / {load_verify[2]:.1f}."]
    if os.environ.get(PG_ENV) != "0":
        out += ["", history_pg.run(tmp, total)]
    return "\n".join(out)


def main() -> None:  # pragma: no cover - a manual run: python -m bench.history
    import sys
    import tempfile

    settings = {"--quick": QUICK, "--tiny": None}.get(sys.argv[1] if len(sys.argv) > 1 else "",
                                                     FULL)
    with tempfile.TemporaryDirectory(prefix="rotifer-bench-") as tmp:
        # As root, contained genes run as nobody, who must pass through it.
        Path(tmp).chmod(0o711)
        print(run(Path(tmp), settings or Settings(rounds=3)))


if __name__ == "__main__":
    main()
