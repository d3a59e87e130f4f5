"""Export, import and move stream: their memory stays flat in the agent's size.

An agent is exported, imported and moved in a child process that measures
the peak of Python's allocations (``tracemalloc``) during each, at two sizes
(3,000 and 1,000 entries of 4 KB in ``make test``; 40,000 and 20,000 of 2 KB
-- 80 MB -- in the slow set); the peak must grow far less than the agent does.
The slow set starts at 20,000 because below that the bounded caches are still
filling: measured, the export's peak is 4.5 MB at 5,000 entries, 7.5 at
10,000, 11.7 at 20,000 and 13.0 at 40,000 -- flat once they are full.  What
does grow a little with the entries is bounded: the store's LRU caches of
entry ids and timestamps (8,192 each) and the import's duplicate checks (an
8-byte fingerprint and a write-order number per entry).  Holding the agent -- its rows, their JSON
records, the document -- would take several times the agent's size (the
issue saw ~300 MiB for 36 MB); a stream holds a page of rows and a few
bytes per entry for the duplicate checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ENTRIES = 40_000
VALUE = 1024
LIMIT_MB = 20  # the 40k-entry agent is 80 MB

CHILD = textwrap.dedent('''
    import json, sys, tracemalloc
    from pathlib import Path
    from rotifer.memory import MemoryStore
    from rotifer.memory.storage.backend import AgentRecord, Row
    from rotifer.memory.model import AccessPolicy, Category, DataPolicy
    from rotifer.memory.transfer import export_agent, import_agent, move_agent

    root, n, size = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    gene = "v2:" + "a" * 64
    with MemoryStore.open(root / "src", url=f"sqlite:{root / 'src.db'}") as store:
        total = 0
        with store.backend.write("big") as tx:
            tx.insert_agent(AgentRecord("big", 1 << 30, DataPolicy(), 0, n + 1))
            for i in range(n):
                key = f"k/{i:06d}"
                value = (b"%06d" % i) * (size // 6)
                total += len(key) + len(value)
                tx.put(Row("big", key, Category.PATTERN, value, gene, "d", gene, i, i,
                           AccessPolicy(), None, None, i + 1))
            tx.update_agent("big", total, n + 1, 0)
    peaks = {"agent_mb": total / 2**20}

    def measure(name, fn):
        tracemalloc.start()
        report = fn()
        peaks[name] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        assert report.entries == n and report.bytes == total, report

    with MemoryStore.open(root / "src", url=f"sqlite:{root / 'src.db'}") as store:
        measure("export", lambda: export_agent(store, "big", root / "big.json"))
    with MemoryStore.open(root / "dst", url=f"sqlite:{root / 'dst.db'}") as store:
        measure("import", lambda: import_agent(store, root / "big.json"))
    with MemoryStore.open(root / "src", url=f"sqlite:{root / 'src.db'}") as source, \\
            MemoryStore.open(root / "mv", url=f"sqlite:{root / 'mv.db'}") as destination:
        measure("move", lambda: move_agent(source, destination, "big"))
    print(json.dumps(peaks))
''')


def _peaks(root: Path, entries: int, value: int) -> subprocess.Popen[str]:
    root.mkdir()
    return subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(entries), str(value)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _measure(tmp_path: Path, small: int, large: int, value: int) -> None:
    """Peak memory must grow far less than the agent does from ``small`` to ``large``
    entries."""
    procs = {n: _peaks(tmp_path / str(n), n, value) for n in (small, large)}
    peaks = {}
    for n, proc in procs.items():
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
        peaks[n] = json.loads(out.strip().splitlines()[-1])
    print(f"\npeak traced memory (MB): {peaks}")
    grown = peaks[large]["agent_mb"] - peaks[small]["agent_mb"]
    for name in ("export", "import", "move"):
        # Holding the agent would add at least its own growth (values, records, JSON).
        assert peaks[large][name] - peaks[small][name] < 0.25 * grown, (name, peaks)
        assert peaks[large][name] < LIMIT_MB, (name, peaks)


def test_export_import_and_move_memory_is_flat(tmp_path: Path) -> None:
    _measure(tmp_path, 1000, 3000, 4096)


@pytest.mark.slow
def test_export_import_and_move_memory_is_flat_at_40k_entries(tmp_path: Path) -> None:
    _measure(tmp_path, 20_000, ENTRIES, VALUE * 2)
