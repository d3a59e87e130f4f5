"""Writers killed with SIGKILL in the middle of their changes, hundreds of times.

Real subprocesses (``churn.py``) write, update, delete, read and query one
agent's memory with a small quota -- so writes evict -- and are killed after
a random short delay, several at a time.  The test samples the database the
whole time, and afterwards (the "restart") checks the file, the byte total and
the write-ahead audit log against each other.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from rotifer.memory import MemoryStore
from rotifer.memory.audit.verify import verify_agent

from .helpers import (
    check_postgres,
    check_replay,
    check_sqlite,
    gene_id,
    last_groups,
    postgres_state,
    read_audit,
    sqlite_state,
)

HERE = Path(__file__).parent
CHURN = HERE / "churn.py"
QUOTA = 1536
SLOTS = 4
TARGET_KILLS = 400  # kills aimed at, per backend
MIN_KILLS = 200  # the fewest accepted
TIME_CAP_S = 28.0  # after this, stop as soon as MIN_KILLS are done
HARD_CAP_S = 240.0  # a slow machine gets this long to reach MIN_KILLS


@dataclass
class Target:
    """The store the writers share: a SQLite file, or a PostgreSQL schema."""

    root: Path
    url: str

    @property
    def sqlite(self) -> Path | None:
        return Path(self.url[len("sqlite:"):]) if self.url.startswith("sqlite:") else None

    @property
    def kind(self) -> str:
        return "sqlite" if self.sqlite is not None else "postgres"

    def env(self) -> dict[str, str]:
        return {**os.environ, "ROTIFER_CHURN_URL": self.url}

    def check(self) -> dict[str, tuple[int, int]]:
        db = self.sqlite
        return check_sqlite(db) if db is not None else check_postgres(self.url)

    def state(self, agent: str) -> dict[str, tuple[str, int]]:
        db = self.sqlite
        return sqlite_state(db, agent) if db is not None else postgres_state(self.url, agent)

    def snapshots(self) -> Iterator[tuple[int, int, int]]:
        """(used, summed, quota) of agent ``a``, each from one consistent snapshot."""
        db = self.sqlite
        if db is not None:
            conn = sqlite3.connect(db, isolation_level=None, timeout=30)
            try:
                while True:
                    conn.execute("BEGIN")
                    used, quota = conn.execute(
                        "SELECT used_bytes, quota_bytes FROM memory_agents "
                        "WHERE agent_id = 'a'").fetchone()
                    (summed,) = conn.execute(
                        "SELECT coalesce(sum(length(CAST(key AS BLOB)) + length(value)), 0) "
                        "FROM memory_entries WHERE agent_id = 'a'").fetchone()
                    conn.execute("COMMIT")
                    yield used, summed, quota
            finally:
                conn.close()
        else:
            with psycopg.connect(self.url, autocommit=True) as pg:
                while True:
                    with pg.transaction():
                        pg.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                        used, quota = pg.execute(
                            "SELECT used_bytes, quota_bytes FROM memory_agents "
                            "WHERE agent_id = 'a'").fetchone()  # type: ignore[misc]
                        (summed,) = pg.execute(
                            "SELECT coalesce(sum(octet_length(convert_to(key, 'UTF8')) + "
                            "octet_length(value)), 0) FROM memory_entries "
                            "WHERE agent_id = 'a'").fetchone()  # type: ignore[misc]
                    yield int(used), int(summed), int(quota)


def make_agent(root: Path, quota: int = QUOTA, url: str | None = None) -> Target:
    target = Target(root, url or f"sqlite:{root / 'memory.db'}")
    with MemoryStore.open(root / ".rotifer", url=target.url) as store:
        store.create_agent("a", quota_bytes=quota)
    return target


@pytest.fixture
def target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Target:
    url = request.getfixturevalue("pg_fresh_url") if backend == "postgres" else None
    return make_agent(tmp_path, QUOTA, url)


class Sampler(threading.Thread):
    """Reads the agent's byte total, quota and entry sizes in one snapshot, over and over."""

    def __init__(self, target: Target) -> None:
        super().__init__(daemon=True)
        self.target, self.stop, self.samples, self.bad = target, threading.Event(), 0, []
        self.peak = 0

    def run(self) -> None:
        snapshots = self.target.snapshots()
        try:
            for used, summed, quota in snapshots:
                self.samples += 1
                self.peak = max(self.peak, used)
                if used > quota or used != summed:
                    self.bad.append((used, summed, quota))
                if self.stop.is_set():
                    break
                time.sleep(0.01)
        finally:
            snapshots.close()  # type: ignore[attr-defined]


def more_kills(deadline: float, kills: int) -> bool:
    """Go on until TARGET_KILLS, or past the soft deadline once MIN_KILLS are done,
    so that a slow or busy machine takes longer instead of failing the count."""
    now = time.monotonic()
    if kills >= TARGET_KILLS or now >= deadline + (HARD_CAP_S - TIME_CAP_S):
        return False
    return now < deadline or kills < MIN_KILLS


def killer(target: Target, rng: random.Random, first: int, step: int, deadline: float,
           out: dict[str, list[object]]) -> None:
    """One slot: have the fork server start a writer, wait until it is ready, let it run
    a random short while, SIGKILL it; again, until the deadline or enough kills."""
    server = subprocess.Popen([sys.executable, str(CHURN), "serve", str(target.root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, bufsize=1, env=target.env())
    assert server.stdin is not None and server.stdout is not None
    n = first
    try:
        while more_kills(deadline, len(out["kills"])):
            server.stdin.write(f"spawn {n} {rng.randrange(1 << 30)}\n")
            server.stdin.flush()
            ready = server.stdout.readline().split()
            if len(ready) != 2 or ready[0] != "ready":
                out["failures"].append((n, ready))
                return
            pid = int(ready[1])
            time.sleep(rng.uniform(0.0, 0.08))
            os.kill(pid, signal.SIGKILL)
            server.stdin.write(f"reap {pid}\n")
            server.stdin.flush()
            reaped = server.stdout.readline().split()
            if reaped != ["reaped", str(pid), str(int(signal.SIGKILL))]:
                out["failures"].append((n, reaped))
                return
            out["kills"].append(n)
            n += step
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        assert server.stderr is not None
        err = server.stderr.read()
        server.stderr.close()
        server.stdout.close()
        if server.returncode != 0 or err:
            out["failures"].append(("server", server.returncode, err[-3000:]))


@pytest.mark.reliability(
    "Faults", "Writers killed (SIGKILL) at random points of writes, updates, deletes and "
    "evictions, several at a time (SQLite and PostgreSQL)",
    "integrity_check ok (SQLite); byte total = sum of key+value bytes, never over quota (sampled "
    "throughout); every stored change has its write-ahead audit line; audit verify passes "
    "(killed writers' changes marked rolled_back); the store works on")
def test_sigkill_writers_hundreds_of_times(target: Target, tmp_path: Path,
                                           figure: Callable[[str, object], None]) -> None:
    """Four slots keep a writer each (forked by churn.py's fork server: random writes in all categories, updates,
    deletes, reads, queries on one agent with a 1536-byte quota) and SIGKILL it 0-80 ms after
    it is ready, up to 400 times (at least 200: after 28 s it stops once 200 are done), while a reader samples the byte total;
    then the file, totals and audit log are checked and the store is used again."""
    seed = random.randrange(1 << 30)
    print(f"seed {seed}")
    rng = random.Random(seed)
    sampler = Sampler(target)
    sampler.start()
    out: dict[str, list[object]] = {"kills": [], "failures": []}
    deadline = time.monotonic() + TIME_CAP_S
    started = time.monotonic()
    slots = [threading.Thread(target=killer, args=(target, random.Random(rng.random()), i,
                                                   SLOTS, deadline, out))
             for i in range(SLOTS)]
    for t in slots:
        t.start()
    for t in slots:
        t.join()
    seconds = time.monotonic() - started
    sampler.stop.set()
    sampler.join()
    assert not out["failures"], out["failures"]
    kills = len(out["kills"])
    assert kills >= MIN_KILLS, f"only {kills} kills in {seconds:.1f} s"
    assert sampler.samples > 0 and not sampler.bad, sampler.bad[:5]

    # the restart: the file, the totals, the audit log
    totals = target.check()
    audit = read_audit(tmp_path / ".rotifer")  # only the very last line may be torn
    writers = [gene_id(f"writer-{n}") for n in out["kills"]]
    maybe = last_groups(audit.lines, writers)
    counts = check_replay(audit.lines, "a", target.state("a"), maybe)
    changes = [line for line in audit.lines if line["action"] in {"write", "update", "delete",
                                                                   "evict"}]
    assert {line["action"] for line in changes} == {"write", "update", "delete", "evict"}
    with MemoryStore.open(tmp_path / ".rotifer", url=target.url) as store:
        g = store.for_gene("a", gene_id("after"), "d")
        g.write_memory("after", b"x" * 10, "CACHE")
        assert g.read_memory("after").value == b"x" * 10  # type: ignore[union-attr]
    after = read_audit(tmp_path / ".rotifer")
    assert not after.torn and after.lines[-1]["key"] == "after"
    target.check()
    # audit verify: the chain is intact, each killed writer's uncommitted change is
    # found (and marked rolled_back), and the committed ones replay onto the store exactly.
    with MemoryStore.open(tmp_path / ".rotifer", url=target.url) as store:
        report = verify_agent(store, "a")
        assert report.ok, report.message
        assert verify_agent(store, "a").repaired == 0
    rolled = sum(1 for line in read_audit(tmp_path / ".rotifer").lines
                 if line["action"] == "rolled_back")
    figure("rolled_back lines", rolled)
    print(f"{kills} kills in {seconds:.1f} s; {len(changes)} changes audited; "
          f"{counts['keys']} keys replayed; {sampler.samples} samples, peak "
          f"{sampler.peak}/{QUOTA} B; final {totals['a']}")
    figure("kills", kills)
    figure("in seconds", f"{seconds:.1f}")
    figure("audited changes", len(changes))
    figure("samples", sampler.samples)


def test_replay_check_catches_unaudited_and_lost_changes() -> None:
    """Guard: check_replay fails on a stored change without its line, on a logged change
    that is missing, and on lines that contradict each other; a killed writer's last line
    may go either way."""
    w = {"agent": "a", "action": "write", "key": "k", "category": "CACHE", "bytes": 5,
         "actor": "x", "ts": "1"}
    u = dict(w, action="update", bytes=7, previousBytes=5, ts="2")
    assert check_replay([w, u], "a", {"k": ("CACHE", 7)})
    for stored in ({"k": ("CACHE", 5)}, {}, {"k": ("CACHE", 7), "other": ("CACHE", 3)}):
        with pytest.raises(AssertionError):
            check_replay([w, u], "a", stored)
    with pytest.raises(AssertionError):
        check_replay([w, w], "a", {"k": ("CACHE", 5)})
    maybe = last_groups([w, u], ["x"])
    assert maybe == {1}
    for stored in ({"k": ("CACHE", 5)}, {"k": ("CACHE", 7)}):
        check_replay([w, u], "a", stored, maybe)
