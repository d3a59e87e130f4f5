"""The console's pages for a big agent: p50 and p99 per page, SQLite and PostgreSQL.

One agent of N entries written one by one through a gene's ``write_memory``
(so its audit log holds N lines), and one of 10 for comparison, served by the
real console app in a real uvicorn on loopback (a thread of this process),
fetched over HTTP with the session cookie.  Pages: the agent's first page
(newest first), a later page (its cursor), a category filter, the size sort
(reads every entry's brief), the history page and its picture (the agent's own
lines, through the history index, as ``audit show`` reads them) and the
overview.  The target is under 200 ms p99 for a page of entries.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from pathlib import Path

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from tests.console.helpers import Served

from .pgserver import MISSING, Server, find_bindir
from .timing import Settings

TARGET_MS = 200.0
GENE = "def express(input, ctx):\n    return input\n"


def entries_for(settings: Settings) -> int:
    return max(settings.scales)


def build(root: Path, n: int, url: str | None) -> Project:
    project = Project.init(root)
    if url is not None:
        (project.dot / "config.json").write_text(json.dumps({"memoryUrl": url}))
    folder = project.genes_dir / "filler"
    folder.mkdir(parents=True)
    (folder / "phenotype.json").write_text(json.dumps({
        "name": "filler", "domain": "bench", "version": "1.0.0", "fidelity": "Native",
        "inputSchema": {}, "outputSchema": {}}))
    (folder / "gene.py").write_text(GENE)
    gene = wrap_gene(project, "filler")
    value = os.urandom(100)
    categories = ("CACHE", "PATTERN", "CONTEXT", "PREFERENCE")
    for agent, count in (("small", 10), ("big", n)):
        Agents(project).create(agent, ["filler"], quota_bytes=1 << 30)
        with project.open_store(agent) as store:
            memory = store.for_gene(agent, gene.v2_id, "bench")
            for i in range(count):
                memory.write_memory(f"k/{i:07d}", value, categories[i % 4])
    return project


def timed(served: Served, path: str, count: int) -> tuple[float, float]:
    """(p50, p99) in milliseconds of ``count`` GETs of ``path`` (after one warm-up)."""
    served.get(path)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        resp = served.get(path)
        times.append((time.perf_counter() - start) * 1000)
        assert resp.status == 200, (path, resp.status, resp.text[:200])
    times.sort()
    p99 = times[min(len(times) - 1, round(0.99 * (len(times) - 1)))]
    return statistics.median(times), p99


def pages(served: Served) -> dict[str, str]:
    first = served.get("/agents/big").text
    cursor = re.search(r'cursor=([0-9.]+)', first)
    later = f"/agents/big?cursor={cursor.group(1)}" if cursor else "/agents/big"
    return {"agent page of a 10-entry agent (for comparison)": "/agents/small",
            "agent page, first 50 (newest first)": "/agents/big",
            "agent page, next 50 (cursor)": later,
            "agent page, category CACHE": "/agents/big?category=CACHE",
            "agent page, key prefix": "/agents/big?prefix=k/00012",
            "agent page, key contains (scans until a page matches)": "/agents/big?q=0999",
            "agent page, sorted by size (reads every entry)": "/agents/big?sort=size",
            "history page, newest 50 lines (the history index)": "/agents/big/history",
            "history picture (the history index's rows)": "/agents/big/history/chart",
            "overview": "/"}


def run(tmp: Path, settings: Settings) -> str:
    n = entries_for(settings)
    count = max(5, settings.rounds * 3)
    slow_count = max(3, settings.rounds // 6)
    backends: list[tuple[str, str | None]] = [("SQLite", None)]
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    notes = []
    bindir = find_bindir()
    server: Server | None = None
    try:
        if bindir is not None:
            server = Server(bindir).__enter__()
            backends.append(("PostgreSQL", server.database("console_bench")))
        else:
            notes.append(f"PostgreSQL: {MISSING}.")
        for name, url in backends:
            project = build(tmp / name, n, url)
            served = Served(project)
            try:
                for label, path in pages(served).items():
                    slow = "reads" in label
                    rows.setdefault(label, {})[name] = timed(served, path,
                                                             slow_count if slow else count)
            finally:
                served.stop()
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    names = [name for name, _ in backends]
    head = "| page | " + " | ".join(f"{b} p50 | {b} p99" for b in names) + " |"
    lines = [f"An agent of {n:,} entries and {n:,} audit lines; {count} requests per page "
             f"({slow_count} for the pages that read everything); milliseconds; target "
             f"< {TARGET_MS:.0f} ms p99 for a page of entries.", "", head,
             "|" + "---|" * (1 + 2 * len(names))]
    for label, by in rows.items():
        cells = [f"{by[b][0]:.1f} | {by[b][1]:.1f}" if b in by else "- | -" for b in names]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", *notes])
