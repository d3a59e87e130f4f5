"""``audit verify`` and ``audit show`` on a large audit log (issue 22).

A project log of ``size`` bytes (1 GB in a full run): agent ``m``'s history
-- a few thousand real changes, a move to a second SQLite store half-way --
buried in other agents' lines (written directly, chained as the store chains
them), half of it in a rolled-over file.  Each command then runs in a fresh
process, as a deployer runs it, and the table gives its wall time and the
process's peak resident memory (``ru_maxrss``): the point is that memory
stays flat whatever the log's size while the time grows with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rotifer.memory import ManualClock, MemoryStore
from rotifer.memory.audit.text import ENCODER, chain, line_hash
from rotifer.memory.transfer import move_agent

from .report import format_seconds
from .timing import FULL, QUICK, Settings

GENE = "v2:" + "b" * 64
SIZES = {FULL: 1 << 30, QUICK: 100 << 20}
TINY_SIZE = 2 << 20
#: Override the log's size (bytes), e.g. to try 100 MB in a full run.
SIZE_ENV = "ROTIFER_BENCH_AUDIT_BYTES"

COMMANDS = {
    "verify": "from rotifer.memory.audit.verify import verify_agent as v; r = v(s, 'm'); "
              "assert r.ok, r.message",
    "show --limit 10": "from rotifer.memory.audit.history import audit_history as h; "
                       "assert len(list(h(s, 'm', limit=10))) == 10",
    "show (all of m's lines)": "from rotifer.memory.audit.history import audit_history as h; "
                               "assert sum(1 for _ in h(s, 'm')) > 1000",
}


def append_noise(log: Path, nbytes: int) -> None:
    """Append ``nbytes`` of 50 other agents' lines to ``log``, chained as the store
    chains them (also the large log of tests/memory/test_audit_stream.py)."""
    with open(log, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - 65536))
        prev = line_hash(f.read().splitlines()[-1])
    line: dict[str, Any] = {"ts": "2026-03-01T12:00:00.000000Z", "agent": "", "action": "write",
                            "key": "", "category": "CACHE", "actor": GENE, "bytes": 300,
                            "entryId": None, "epoch": "0" * 12, "seq": 0}
    written = n = 0
    with open(log, "ab") as out:
        while written < nbytes:
            bodies = []
            for _ in range(5000):
                n += 1
                line.update(agent=f"other-{n % 50}", key=f"cache/{n:012d}" + "x" * 100, seq=n)
                bodies.append(ENCODER.encode(line).encode())
            data, prev = chain(bodies, prev)
            out.write(data)
            written += len(data)


def _work(store: MemoryStore, n: int) -> None:
    memory = store.for_gene("m", GENE, "bench")
    for i in range(n):
        memory.write_memory(f"bench/{i % 200}", b"v" * (i % 50), "CONTEXT")


def build(tmp: Path, size: int) -> Path:
    """The project folder with the log; returns its ``.rotifer``."""
    rot = tmp / ".rotifer"
    clock = ManualClock("2026-03-01T12:00:00Z")
    a = MemoryStore.open(rot, url=f"sqlite:{tmp / 'a.db'}", clock=clock)
    b = MemoryStore.open(rot, url=f"sqlite:{tmp / 'b.db'}", clock=clock)
    a.create_agent("m")
    _work(a, 1000)
    log = rot / "audit.jsonl"
    append_noise(log, size // 2)
    a.audit.close()
    b.audit.close()
    os.rename(log, rot / "audit.jsonl.1")
    _work(a, 1000)
    move_agent(a, b, "m")
    _work(b, 500)
    append_noise(log, size - size // 2)
    _work(b, 10)
    a.close()
    b.close()
    return rot


def _measure(rot: Path, code: str) -> tuple[float, int]:
    """Run ``code`` in a fresh process on the store ``b.db``: (wall time, peak RSS)."""
    script = (f"import resource; from pathlib import Path; from rotifer.memory import MemoryStore; "
              f"s = MemoryStore.open(Path({str(rot)!r}), url={'sqlite:' + str(rot.parent / 'b.db')!r}); "
              f"{code}; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - start
    return elapsed, int(done.stdout.split()[-1]) * 1024  # Linux: kilobytes


def run(tmp: Path, settings: Settings) -> str:
    size = int(os.environ.get(SIZE_ENV) or SIZES.get(settings, TINY_SIZE))
    tmp.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    rot = build(tmp, size)
    built = time.perf_counter() - start
    total = sum(f.stat().st_size for f in rot.glob("audit.jsonl*"))
    rows = ["| command | log | wall time | peak RSS of the process |", "|---|---|---|---|"]
    idle_s, idle_rss = _measure(rot, "pass")
    rows.append(f"| (start-up only: open the store) | - | {format_seconds(idle_s)} | "
                f"{idle_rss / 1e6:.0f} MB |")
    for name, code in COMMANDS.items():
        elapsed, rss = _measure(rot, code)
        rows.append(f"| `audit {name}` | {total / 1e6:,.0f} MB | {format_seconds(elapsed)} | "
                    f"{rss / 1e6:.0f} MB |")
    lines = 0
    for file in rot.glob("audit.jsonl*"):
        with open(file, "rb") as f:
            while block := f.read(1 << 20):
                lines += block.count(b"\n")
    files = len(list(rot.glob("audit.jsonl*")))
    note = (f"The log: {total / 1e6:,.0f} MB, {lines:,} lines in {files} files (rolled over "
            "at the default 64 MiB); agent `m`'s 2,512 committed changes (a move to a second "
            f"store half-way) among the lines of 50 other agents (built in {built:.0f} s).  "
            "Each command runs in a fresh process; RSS is that process's peak (Python and "
            "the store included), the start-up row its floor.")
    return note + "\n\n" + "\n".join(rows)
