"""``audit verify`` of one agent on PostgreSQL, by its own lines and ``--full``
(issue 31, item 7): the log of :mod:`.history` built again with the memory on a
throwaway PostgreSQL server (:mod:`.pgserver`), whose ``memory_audit`` keeps
its own copy of every committed line.  Wall-clock and this process's CPU time
(the server's is not in it), with the lines each verify read (its progress)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from rotifer.memory.audit.read import Scan
from rotifer.memory.audit.verify import verify_agent

from .pgserver import MISSING, Server, find_bindir


def _verify(store: object, agent: str, full: bool) -> tuple[float, float, int, str]:
    """(seconds, CPU seconds of this process, log lines read, message) of one verify."""
    seen = [Scan()]
    t0, c0 = time.perf_counter(), time.process_time()
    report = verify_agent(store, agent, full=full, progress=seen.append)  # type: ignore[arg-type]
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert report.ok, report.message
    return took, cpu, seen[-1].lines, report.message


def run(tmp: Path, total: int) -> str:
    """The paragraph for the history table (see the module doc)."""
    from .history import build

    bindir = find_bindir()
    if bindir is None:
        return MISSING + "."
    with Server(bindir) as server:
        t0 = time.perf_counter()
        project = build(tmp / "pg-project", total, server.database("history"))
        built_s = time.perf_counter() - t0
        with project.open_store("big", create=False) as store:
            own = [_verify(store, "big", False) for _ in range(3)]
            full = _verify(store, "big", True)
            again = _verify(store, "big", False)  # the index rebuilt by --full: still whole
            small = _verify(store, "small", False)
        version = server.version
    load = os.getloadavg()
    own.sort()
    mid = own[1]
    assert all("history index" in x[3] for x in [*own, again, small]), own
    return (f"On PostgreSQL {version} (the same log built again, {built_s:.0f} s, the memory "
            f"and its `memory_audit` copy on a throwaway local server): `audit verify` of "
            f"the big agent by its own lines {mid[0]:.2f} s median of 3 ({mid[1]:.2f} s CPU "
            f"in this process; {mid[2]:,} log lines read: its own and the line before each), "
            f"`--full` {full[0]:.1f} s ({full[1]:.1f} s CPU; {full[2]:,} lines) -- "
            f"{full[0] / max(mid[0], 0.001):.0f}x; after `--full` rebuilt its index, "
            f"{again[0]:.2f} s; agent `small` {small[0] * 1000:.0f} ms ({small[2]:,} lines "
            f"read).  Load average then: {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.")
