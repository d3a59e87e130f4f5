"""Load: several processes, thousands of mixed operations each, on one agent's small quota.

Real subprocesses (``churn.py``) run at once on one SQLite file and one audit
log.  The test prints the throughput it measured (no timing is asserted) and
checks the same invariants as the kill test, this time exactly: nobody was
killed, so every audit line is a change that was made.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from rotifer.memory import MemoryStore

from .helpers import audit_lines, check_replay, replay
from .test_kill import CHURN, Sampler, make_agent

PROCESSES = 4
OPS = {"sqlite": 2500, "postgres": 1500}  # operations per process
QUOTA = 2048


@pytest.mark.reliability(
    "Load", "4 processes x 2,500 (SQLite) or 1,500 (PostgreSQL) mixed operations (writes in every category, updates, "
    "deletes, reads, queries) on one agent with a 2 KiB quota (SQLite and PostgreSQL)",
    "no unexpected error; never over quota (sampled); byte total = sum; the audit log "
    "replays exactly to the stored entries")
def test_processes_share_one_small_agent(backend: str, tmp_path: Path,
                                         request: pytest.FixtureRequest,
                                         figure: Callable[[str, object], None]) -> None:
    """Four churn.py processes start together, each does 2,500 (PostgreSQL: 1,500) random
    operations as its own gene (expected refusals only: MEMORY_NOT_FOUND,
    MEMORY_QUOTA_EXCEEDED), a reader samples the byte total; throughput = all operations / wall time from the moment all are
    ready; then the file, totals and a replay of the audit log are checked."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    url = request.getfixturevalue("pg_fresh_url") if backend == "postgres" else None
    target = make_agent(tmp_path, QUOTA, url)
    sampler = Sampler(target)
    sampler.start()
    procs = [subprocess.Popen(
        [sys.executable, str(CHURN), str(tmp_path), f"load-{n}", str(seed + n), str(OPS[backend])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=target.env()) for n in range(PROCESSES)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    started = time.perf_counter()
    results = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out))
    wall = time.perf_counter() - started
    sampler.stop.set()
    sampler.join()
    assert sampler.samples > 0 and not sampler.bad, sampler.bad[:5]

    total = sum(r["ops"] for r in results)
    assert total == PROCESSES * OPS[backend]
    outcomes: Counter[str] = Counter()
    for r in results:
        outcomes.update(r["outcomes"])
    throughput = total / wall
    per_process = [r["ops"] / r["seconds"] for r in results]

    totals = target.check()
    lines = audit_lines(tmp_path / ".rotifer")
    stored = target.state("a")
    check_replay(lines, "a", stored)
    assert replay(lines, "a") == stored
    actions = Counter(line["action"] for line in lines)
    assert actions["write"] + actions["update"] == outcomes["write"]
    assert actions["evict"] > 0 and actions["delete"] == outcomes["delete"]
    refused = outcomes["write:MEMORY_QUOTA_EXCEEDED"] + outcomes["huge:MEMORY_QUOTA_EXCEEDED"]
    assert outcomes["huge"] == 0 and outcomes["huge:MEMORY_QUOTA_EXCEEDED"] > 0
    assert actions["quota_exceeded"] == refused
    # a refused write evicts nothing: every eviction is for a write that was made
    made = {(line["key"], line["ts"]) for line in lines if line["action"] in {"write", "update"}}
    assert all((line["forKey"], line["ts"]) in made
               for line in lines if line["action"] == "evict")
    with MemoryStore.open(tmp_path / ".rotifer", url=target.url) as store:
        assert store.usage("a") == totals["a"]
    print(f"{total} ops by {PROCESSES} processes in {wall:.2f} s: {throughput:.0f} ops/s "
          f"(per process {', '.join(f'{x:.0f}' for x in per_process)}); {dict(outcomes)}; "
          f"audit {dict(actions)}; peak {sampler.peak}/{QUOTA} B")
    figure("ops", total)
    figure("ops/s", f"{throughput:.0f}")
    figure("evictions", actions["evict"])
    figure("quota refusals", actions["quota_exceeded"])
