"""The audit log stays true under interruption and concurrency (issue 15), with real
processes and real signals: SIGINT, SIGTERM and gene deadlines landing anywhere in
agent runs, and several processes writing one agent.  Afterwards ``verify`` finds
the log and the store in agreement (every logged change committed or marked
``rolled_back``), and times follow the order changes were committed in."""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rotifer.agents.build import wrap_gene
from rotifer.agents.genome import Agents
from rotifer.agents.project import Project
from rotifer.memory import MemoryStore
from rotifer.memory.audit.verify import verify_agent
from rotifer.memory.clock import parse_time

from ..genes.helpers import write_gene
from .helpers import audit_lines
from .interrupt import CHURNER
from .test_kill import Target, make_agent

HERE = Path(__file__).parent
WORKER = HERE / "interrupt.py"
CHURN = HERE / "churn.py"


@pytest.fixture
def project(backend: str, tmp_path: Path, request: pytest.FixtureRequest,
            monkeypatch: pytest.MonkeyPatch) -> Project:
    """Agent ``bot`` (gene ``churner``, 2 KB quota: writes evict) in a real project."""
    monkeypatch.delenv("ROTIFER_PROJECT", raising=False)
    monkeypatch.delenv("ROTIFER_MEMORY_URL", raising=False)
    if backend == "postgres":
        monkeypatch.setenv("ROTIFER_MEMORY_URL", request.getfixturevalue("pg_fresh_url"))
    project = Project.init(tmp_path / "proj")
    write_gene(project.genes_dir, "churner", CHURNER, domain="d")
    wrap_gene(project, "churner")
    Agents(project).create("bot", ["churner"], "seq", 2048, None)
    return project


def run_worker(project: Project, mode: str, seconds: float, rng: random.Random,
               signals: bool) -> tuple[dict[str, int], int]:
    """The worker for ``seconds``; with ``signals``, SIGINT/SIGTERM every 2-25 ms."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), mode, str(project.root), str(seconds),
         str(rng.randrange(1 << 30))], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "ROTIFER_TELEMETRY": "0"})
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    sent = 0
    # A run opens the agent's store: on PostgreSQL that is a connection, so the
    # signals come less often there, or they would nearly all land in connecting.
    gap = (0.005, 0.08) if os.environ.get("ROTIFER_MEMORY_URL") else (0.002, 0.025)
    if signals:
        end = time.monotonic() + seconds - 0.2
        while time.monotonic() < end and proc.poll() is None:
            time.sleep(rng.uniform(*gap))
            proc.send_signal(rng.choice([signal.SIGINT, signal.SIGTERM]))
            sent += 1
    out, err = proc.communicate(timeout=seconds + 120)
    assert proc.returncode == 0, (proc.returncode, err[-3000:])
    return json.loads(out), sent


def check_true(project: Project) -> tuple[int, int]:
    """verify passes; every change's lines are followed by nothing contradicting the
    store; returns (committed changes, rolled_back lines)."""
    with project.open_store("bot") as store:
        report = verify_agent(store, "bot")
        assert report.ok, report.message
        again = verify_agent(store, "bot")
        assert again.ok and again.repaired == 0, again.message
    lines = audit_lines(project.dot)
    rolled = [line for line in lines if line["action"] == "rolled_back"]
    return report.changes, len(rolled)


def interrupted(project: Project, mode: str, seconds: float, minimum: int,
                figure: Callable[[str, object], None]) -> None:
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    result, sent = run_worker(project, mode, seconds, random.Random(seed), mode == "signals")
    assert result["interrupted"] >= minimum, result
    changes, rolled = check_true(project)
    print(f"{result}; {sent} signals; {changes} committed changes; {rolled} rolled_back lines")
    figure("interruptions", result["interrupted"])
    figure("rolled_back lines", rolled)


SHORT_S, LONG_S = 3.0, 25.0


@pytest.mark.reliability(
    "Faults", "SIGINT and SIGTERM at random moments of agent runs, in a process that goes on "
    "(SQLite and PostgreSQL)",
    "no audit line claims a change that was not made: each one committed or followed by "
    "rolled_back; audit verify passes")
def test_sigint_sigterm_during_runs_leave_a_true_log(
        project: Project, figure: Callable[[str, object], None]) -> None:
    """A worker runs agent ``bot`` (bursts of writes, updates, deletes, evictions) in a loop
    for 3 s while the test sends it SIGINT or SIGTERM every 2-25 ms (PostgreSQL: 5-80 ms;
    from a handful to hundreds of interruptions, with the machine's load); the worker catches
    each and runs again.  Then ``audit verify`` must pass: chain intact, every committed
    change replayed onto exactly the stored entries."""
    interrupted(project, "signals", SHORT_S, 5, figure)


@pytest.mark.reliability(
    "Faults", "Gene deadlines of 1-60 ms interrupting a Python gene's memory calls "
    "(SQLite and PostgreSQL)", "audit verify passes; rolled_back lines for what was cut off")
def test_deadlines_during_runs_leave_a_true_log(
        project: Project, figure: Callable[[str, object], None]) -> None:
    """run_agent with a random 1-60 ms deadline, over and over for 3 s: the deadline's
    SIGALRM lands anywhere in the gene's memory calls.  Then ``audit verify`` passes."""
    interrupted(project, "deadline", SHORT_S, 5, figure)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["signals", "deadline"])
def test_interruptions_long(project: Project, mode: str,
                            figure: Callable[[str, object], None]) -> None:
    """The same for 25 s each: hundreds of interruptions on SQLite (at least 150), fewer
    on PostgreSQL (each run opens the agent's store: a connection)."""
    on_postgres = bool(os.environ.get("ROTIFER_MEMORY_URL"))  # a run opens a connection
    interrupted(project, mode, LONG_S, 50 if on_postgres else 150, figure)


# -- several processes, one agent --------------------------------------------------


def writers(target: Target, count: int, ops: int) -> None:
    procs = [subprocess.Popen([sys.executable, str(CHURN), str(target.root), str(n),
                               str(1000 + n), str(ops)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=target.env())
             for n in range(count)]
    for proc in procs:
        _out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]


@pytest.fixture
def target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    url = request.getfixturevalue("pg_fresh_url") if backend == "postgres" else None
    return make_agent(tmp_path, 1536, url)


@pytest.mark.reliability(
    "Load", "Four processes changing one agent at once (SQLite and PostgreSQL)",
    "updatedAt and the audit ts strictly increase in commit (seq) order; audit verify passes")
def test_many_writers_times_follow_commit_order(target: Target, tmp_path: Path) -> None:
    """Four churn.py processes do 150 random operations each on one agent (writes,
    updates, deletes, evictions, reads, queries).  Then the stored entries, in seq order,
    have strictly increasing updatedAt; the audit lines of committed changes, in seq
    order, have strictly increasing ts; and ``audit verify`` passes."""
    writers(target, 4, 150)
    with MemoryStore.open(tmp_path / ".rotifer", url=target.url) as store:
        report = verify_agent(store, "a")
        assert report.ok, report.message
        with store.backend.read() as tx:
            rows = sorted(tx.iter_newest("a"), key=lambda r: r.seq)
            record = tx.get_agent("a")
    assert record is not None
    times = [r.updated_us for r in rows]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all(r.updated_us <= record.last_us for r in rows)
    changes: dict[int, int] = {}
    rolled = {line["seq"] for line in audit_lines(tmp_path / ".rotifer")
              if line["action"] == "rolled_back"}
    for line in audit_lines(tmp_path / ".rotifer"):
        if line.get("agent") == "a" and "seq" in line and line["seq"] not in rolled \
                and line["action"] != "rolled_back":
            changes.setdefault(line["seq"], parse_time(line["ts"]))
    seqs = sorted(changes)
    assert seqs == list(range(1, record.next_seq))  # every committed change, no gaps
    stamps = [changes[s] for s in seqs]
    assert all(a < b for a, b in itertools.pairwise(stamps))
