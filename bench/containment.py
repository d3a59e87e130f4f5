"""Containment's cost (issue 23 item 5), contained against trusted, in
interleaved rounds (bench/timing.py: the ratios hold on a loaded machine
even when the times do not):

- one Python gene run (the fork server's child vs in process), and the first
  contained run of a process, which starts the fork server;
- one Node gene run (a confined vs an unconfined child);
- 1,000 memory writes in one run, timed inside the gene (wall and CPU: the
  gene's process, plus the parent's thread that serves the calls when
  contained), and 1,000 reads of a missing key (the store does little: the
  round trip shows);
- what a round trip costs at least on this machine: two processes passing a
  byte back and forth over two pipes; and how much slower the store's own
  code runs when each call is followed by such a round trip with a process
  that does nothing (caches and, in a VM, the idle CPU's wake-up).

    PYTHONPATH=. .venv/bin/python bench/containment.py [ROUNDS]
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.timing import compare
from rotifer.genes.contain.forkserver import server
from rotifer.genes.contain.sandbox import CONTAINED, Grant
from rotifer.genes.execute import express
from rotifer.genes.gene import Gene, load_gene, register_gene
from rotifer.genes.registry import Registry
from rotifer.memory import DeniedMemory, GeneMemoryAccess, MemoryStore
from tests.genes.helpers import write_gene

TRUSTED = Grant(trusted=True)
CALLS = """import time
def express(input, ctx):
    m = ctx.memory
    wall, cpu = time.perf_counter(), time.thread_time()
    for i in range(1000):
        if input == "write":
            m.write_memory('b/k%d' % (i % 50), b'v', 'CACHE')
        else:
            m.read_memory('none/here')
    return [time.perf_counter() - wall, time.thread_time() - cpu]
"""


def calls(gene: Gene, memory: GeneMemoryAccess, op: str,
          rounds: int) -> tuple[list[tuple[str, float, float]], str]:
    """(what, contained, trusted) for the loop's wall and CPU time (ms),
    medians; and a line splitting a contained call's CPU between the two
    processes (µs a call)."""
    got: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for r in range(rounds):
        for contained in ((True, False) if r % 2 else (False, True)):
            cpu = time.thread_time()
            wall, gene_cpu = express(gene, op, memory, deadline_s=600,
                                     grant=CONTAINED if contained else TRUSTED)
            parent = time.thread_time() - cpu if contained else 0.0
            got[contained].append((wall, gene_cpu + parent, parent))
    med = {k: [statistics.median(x[i] for x in v) * 1e3 for i in (0, 1, 2)]
           for k, v in got.items()}
    split = (f"1,000 {op}s contained, a call's CPU: {med[True][2]:.0f} us serving it in rotifer, "
             f"{med[True][1] - med[True][2]:.0f} us in the gene's process; in process "
             f"{med[False][1]:.0f} us; wall {med[True][0]:.0f} us")
    return [(f"1,000 {op}s: loop wall", med[True][0], med[False][0]),
            (f"1,000 {op}s: CPU, both processes", med[True][1], med[False][1])], split


@contextlib.contextmanager
def echo_process() -> Iterator[Callable[[], None]]:
    """A forked process that answers each byte with one; yields a one-byte round
    trip with it (over two pipes), and ends it afterwards."""
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(a_w)
        while os.read(a_r, 1):
            os.write(b_w, b"y")
        os._exit(0)
    os.close(a_r)
    os.close(b_w)

    def ping() -> None:
        os.write(a_w, b"x")
        os.read(b_r, 1)

    try:
        yield ping
    finally:
        os.close(a_w)
        os.waitpid(pid, 0)
        os.close(b_r)


def round_trip_floor(n: int = 5000) -> float:
    """µs a one-byte round trip between two processes over two pipes takes."""
    with echo_process() as ping:
        start = time.perf_counter()
        for _ in range(n):
            ping()
        took = time.perf_counter() - start
    return took / n * 1e6


def interleaved_store_cpu(memory: GeneMemoryAccess, rounds: int) -> tuple[float, float]:
    """µs of this thread's CPU a write takes alone, and followed each time by a
    round trip with a process that does nothing."""
    with echo_process() as ping:
        def pings() -> None:
            for _ in range(100):
                ping()

        def writes(with_ping: bool) -> Callable[[], object]:
            def run() -> None:
                for i in range(100):
                    memory.write_memory(f"b/k{i % 50}", b"v", "CACHE")
                    if with_ping:
                        ping()
            return run

        # The ping's own CPU (a write and a read, ~the floor's system calls) is
        # taken out below by timing the pings alone.
        got = compare({"alone": writes(False), "ping": writes(True), "pings only": pings},
                      rounds=rounds, iters=1, cpu=True)
    return got["alone"] / 100 * 1e6, (got["ping"] - got["pings only"]) / 100 * 1e6


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    root = Path(tempfile.mkdtemp())
    root.chmod(0o711)  # as root, contained genes run as nobody: it must reach their folder
    genes = root / "genes"
    registry = Registry(root / ".rotifer")
    write_gene(genes, "py", "def express(input, ctx):\n    return input\n")
    write_gene(genes, "js", "exports.express = (i) => i;\n", file="index.js")
    write_gene(genes, "calls", CALLS)
    py, js = load_gene(genes, "py"), load_gene(genes, "js")
    gene = register_gene(load_gene(genes, "calls", registry), registry, via="wrap")
    rows: list[tuple[str, float, float]] = []
    firsts = []
    for _ in range(max(3, rounds // 3)):
        server().shutdown()
        start = time.perf_counter()
        express(py, 1, DeniedMemory(), grant=CONTAINED)
        firsts.append(time.perf_counter() - start)
    trusted_py = compare({"t": lambda: express(py, 1, DeniedMemory(), grant=TRUSTED)},
                         rounds=rounds, iters=1)["t"]
    rows.append(("first contained Python run (server start)", statistics.median(firsts) * 1e3,
                 trusted_py * 1e3))
    for name, g in (("Python gene run", py), ("Node gene run", js)):
        got = compare({"c": lambda g=g: express(g, 1, DeniedMemory(), grant=CONTAINED),
                       "t": lambda g=g: express(g, 1, DeniedMemory(), grant=TRUSTED)},
                      rounds=rounds, iters=1)
        rows.append((name, got["c"] * 1e3, got["t"] * 1e3))
    with MemoryStore.open(root / ".rotifer") as store:
        store.create_agent("a", 1 << 30)
        memory = store.for_gene("a", gene.v2_id, gene.domain)
        express(gene, "write", memory, grant=CONTAINED, deadline_s=600)  # warm up
        notes = []
        for op in ("write", "read"):
            got, note = calls(gene, memory, op, max(5, rounds // 2))
            rows += got
            notes.append(note)
        alone, pinged = interleaved_store_cpu(memory, rounds)
    print(f"{'':44} {'contained':>10} {'trusted':>10} {'extra':>9} {'ratio':>6}")
    for name, c, t in rows:
        print(f"{name:44} {c:10.1f} {t:10.1f} {c - t:9.1f} {c / t:6.2f}")
    for note in notes:
        print(note)
    print(f"round trip over two pipes (floor): {round_trip_floor():.1f} us")
    print(f"a write's CPU in process: {alone:.1f} us alone, {pinged:.1f} us when each is "
          "followed by a round trip with an idle process")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    server().shutdown()


if __name__ == "__main__":
    main()
