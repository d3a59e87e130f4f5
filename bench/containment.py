"""Containment's cost (issue 23): one Python gene run contained vs trusted (in
process), one Node gene run contained vs trusted (an unconfined child), and a
Python gene making 1,000 memory calls in one run, contained vs trusted.

    .venv/bin/python bench/containment.py [ROUNDS]

Prints the median of ROUNDS (default 15) of each, in ms, and the ratios; all
in one run, so the ratios hold on a loaded machine even when the times do not.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rotifer.genes.contain.sandbox import CONTAINED, Grant
from rotifer.genes.execute import express
from rotifer.genes.gene import load_gene, register_gene
from rotifer.genes.registry import Registry
from rotifer.memory import DeniedMemory, MemoryStore
from tests.genes.helpers import write_gene

CALLS = ("def express(input, ctx):\n    for i in range(1000):\n"
         "        ctx.memory.write_memory('b/k%d' % (i % 50), b'v', 'CACHE')\n    return 1\n")


def median_ms(f: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    root = Path(tempfile.mkdtemp())
    genes = root / "genes"
    registry = Registry(root / ".rotifer")
    write_gene(genes, "py", "def express(input, ctx):\n    return input\n")
    write_gene(genes, "js", "exports.express = (i) => i;\n", file="index.js")
    write_gene(genes, "calls", CALLS)
    py, js = load_gene(genes, "py"), load_gene(genes, "js")
    calls = register_gene(load_gene(genes, "calls", registry), registry, via="wrap")
    trusted = Grant(trusted=True)
    rows = []
    for name, gene in (("Python gene run", py), ("Node gene run", js)):
        c = median_ms(lambda g=gene: express(g, 1, DeniedMemory(), grant=CONTAINED), rounds)
        t = median_ms(lambda g=gene: express(g, 1, DeniedMemory(), grant=trusted), rounds)
        rows.append((name, c, t))
    with MemoryStore.open(root / ".rotifer") as store:
        store.create_agent("a", 1 << 30)
        memory = store.for_gene("a", calls.v2_id, calls.domain)
        c = median_ms(lambda: express(calls, 1, memory, grant=CONTAINED), max(3, rounds // 3))
        t = median_ms(lambda: express(calls, 1, memory, grant=trusted), max(3, rounds // 3))
        rows.append(("1,000 memory writes (whole run)", c, t))
    print(f"{'':34} {'contained':>10} {'trusted':>10} {'extra':>9} {'ratio':>6}")
    for name, c, t in rows:
        print(f"{name:34} {c:10.1f} {t:10.1f} {c - t:9.1f} {c / t:6.2f}")


if __name__ == "__main__":
    main()
