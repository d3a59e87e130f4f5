"""Several real processes on one agent at once (SQLite backend).

Each worker mixes PREFERENCE writes (never evicted, so every one of them must
survive: no lost update) with CACHE churn under a tight quota (so cleanup runs
concurrently), reads and deletes.  Afterwards the byte total must equal the
sum of the entries, never exceed the quota, and every change must have its
audit line.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore

from .helpers import audit_lines, gene_id

WORKERS = 4
OPS = 150
QUOTA = 6000


def worker(rot: str, n: int, queue: mp.Queue) -> None:  # type: ignore[type-arg]
    store = MemoryStore.open(Path(rot))
    mem = store.for_gene("shared", gene_id(f"w{n}"), "load")
    stats = {"prefs": 0, "cache": 0, "quota": 0, "other": 0}
    try:
        for i in range(OPS):
            try:
                if i % 5 == 0:
                    mem.write_memory(f"pref/{n}/{i}", b"p" * 10, "PREFERENCE")
                    stats["prefs"] += 1
                else:
                    mem.write_memory(f"cache/{n}/{i % 17}", b"c" * 200, "CACHE")
                    stats["cache"] += 1
                    if i % 7 == 0:
                        mem.read_memory(f"cache/{(n + 1) % WORKERS}/{i % 17}")
                    if i % 11 == 0:
                        try:
                            mem.delete_memory(f"cache/{n}/{(i + 3) % 17}")
                        except AgentMemoryError as exc:
                            assert exc.code is ErrorCode.NOT_FOUND
            except AgentMemoryError as exc:
                stats["quota" if exc.code is ErrorCode.QUOTA_EXCEEDED else "other"] += 1
                if exc.code is not ErrorCode.QUOTA_EXCEEDED:
                    raise
    finally:
        store.close()
        queue.put(stats)


def test_parallel_processes_keep_every_rule(tmp_path: Path) -> None:
    rot = tmp_path / ".rotifer"
    store = MemoryStore.open(rot)
    store.create_agent("shared", quota_bytes=QUOTA)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(str(rot), n, queue)) for n in range(WORKERS)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sum(r["other"] for r in results) == 0  # no "database is locked", no storage error

    deployer = store.deployer("shared")
    entries = deployer.list()
    used, quota = store.usage("shared")
    assert used == sum(e.size for e in entries) <= quota
    with store.backend.read() as tx:
        assert tx.sum_sizes("shared") == used
    prefs = {e.key for e in entries if e.category == "PREFERENCE"}
    assert prefs == {f"pref/{n}/{i}" for n in range(WORKERS) for i in range(0, OPS, 5)}

    # Replaying the audit log gives exactly the live entries.
    live: set[str] = set()
    for line in audit_lines(rot):
        if line["action"] in ("write", "update"):
            live.add(line["key"])
        elif line["action"] in ("delete", "evict", "expire", "deployer_delete"):
            live.discard(line["key"])
    assert live == {e.key for e in entries}
    writes = sum(1 for line in audit_lines(rot) if line["action"] in ("write", "update"))
    assert writes == sum(r["prefs"] + r["cache"] for r in results)
