"""``audit verify`` and ``audit show`` stream the log (issue 22, items 4 and 6).

A log far larger than the bound -- a rolled-over file of other agents' lines
and the live file, as a busy project has -- is verified and shown while the
peak of Python allocations (tracemalloc) stays under a fixed bound.  The bound
is about memory, not time, so the test does not depend on the machine's speed.
Reading the log whole (as before issue 22) needs more than the log's size.
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench.audit import append_noise
from rotifer.memory import ManualClock, MemoryStore
from rotifer.memory.audit.history import audit_history
from rotifer.memory.audit.read import Scan
from rotifer.memory.audit.verify import verify_agent

from .helpers import gene_id

#: The log's size, and the bound on the peak of allocations while it is read: the
#: log is 8 times larger (kept small because tracemalloc slows every allocation
#: down; ``python -m bench --only audit`` reads a log of 1 GB).
LOG_BYTES = 4 << 20
BOUND = 512 << 10
GENE = gene_id("g")


def peak(fn: Callable[[], Any]) -> tuple[int, Any]:
    tracemalloc.start()
    try:
        result = fn()
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


def test_verify_and_show_hold_a_bounded_part_of_a_large_log(tmp_path: Path) -> None:
    rot = tmp_path / ".rotifer"
    clock = ManualClock("2026-03-01T12:00:00Z")
    store = MemoryStore.open(rot, url=f"sqlite:{tmp_path / 'm.db'}", clock=clock)
    store.create_agent("m")
    memory = store.for_gene("m", GENE, "d")
    for i in range(100):
        memory.write_memory(f"d/{i % 40}", b"v" * (i % 7), "CONTEXT")
    log = rot / "audit.jsonl"
    append_noise(log, LOG_BYTES // 2)
    os.rename(log, rot / "audit.jsonl.1")  # rolled over: the next line starts audit.jsonl
    for i in range(100):
        memory.write_memory(f"d/{i % 40}", b"w", "CONTEXT")
    append_noise(log, LOG_BYTES // 2)
    memory.write_memory("d/last", b"z", "PREFERENCE")
    size = log.stat().st_size + (rot / "audit.jsonl.1").stat().st_size
    assert size >= LOG_BYTES >= 8 * BOUND

    used, report = peak(lambda: verify_agent(store, "m"))
    assert report.ok, report.message
    assert report.changes == 201
    assert used < BOUND, used
    used, newest = peak(lambda: list(audit_history(store, "m", limit=3)))
    assert [x["key"] for x in newest] == ["d/last", "d/19", "d/18"]
    assert used < BOUND, used
    used, everything = peak(lambda: sum(1 for _ in audit_history(store, "m")))
    assert everything == 201
    assert used < BOUND, used
    store.close()


@pytest.mark.postgres
def test_a_long_verify_or_show_is_not_cut_off_on_postgres(pg_fresh_url: str,
                                                           tmp_path: Path) -> None:
    """A memory call is bounded by ``rotifer_timeout`` as a whole; reading a large
    log is not a memory call, so only its statements are bounded.  The reading is
    made slow for certain (the progress callback sleeps past the bound), not by
    the machine."""
    url = pg_fresh_url + "&rotifer_timeout=1"
    store = MemoryStore.open(tmp_path / ".rotifer", url=url)
    store.create_agent("m")
    store.for_gene("m", GENE, "d").write_memory("d/k", b"v", "CONTEXT")

    def slow(stats: Scan) -> None:
        time.sleep(1.5)

    report = verify_agent(store, "m", progress=slow)
    assert report.ok, report.message
    assert [x["key"] for x in audit_history(store, "m", progress=slow)] == ["d/k"]
    store.close()
