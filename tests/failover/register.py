"""The register test of the failover tests, in the style of Jepsen's.

Worker processes (:mod:`tests.failover.worker`) write and delete their own
keys across three agents through one multi-host URL and record what each call
was told, while the cluster fails over at random moments; afterwards
:func:`check_register` asks the new primary: every acknowledged change must be
there (up to the calls after it that failed, which may or may not have
happened), every value there must be one some call wrote, and ``audit verify``
must pass on every agent.

:func:`run_register` takes any :class:`Cluster`: a primary and a standby
promoted by hand (:class:`tests.pg_failover.PgPair`) or by pg_auto_failover's
monitor (:class:`tests.pg_autofailover.AutoFailover`).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from rotifer.memory import MemoryStore
from rotifer.memory.audit.verify import verify_agent

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ["a0", "a1", "a2"]


class Cluster(Protocol):
    """What the register test needs of a primary and its standby."""

    failovers: int

    def url(self) -> str:
        """One multi-host URL that finds whichever node is the primary."""
        ...

    def fail_over(self) -> None:
        """Kill the primary, have the standby promoted, the pair healthy again."""
        ...


def _workers(pair: Cluster, rotifer_dir: Path, count: int, tmp: Path
             ) -> tuple[list[subprocess.Popen[bytes]], list[Path], Path]:
    stop = tmp / "stop"
    outs = [tmp / f"worker{n}.jsonl" for n in range(count)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "tests.failover.worker", pair.url(), str(rotifer_dir), str(n),
         ",".join(AGENTS), str(outs[n]), str(stop)],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for n in range(count)]
    return procs, outs, stop


def _acked(out: Path) -> int:
    try:
        return sum(1 for line in out.read_text().splitlines() if '"ok": true' in line)
    except OSError:
        return 0


def _wait_for_acks(outs: list[Path], at_least: list[int], procs: list[subprocess.Popen[bytes]],
                   timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise AssertionError(f"a worker died: {err}")
        if all(_acked(out) >= need for out, need in zip(outs, at_least, strict=True)):
            return
        time.sleep(0.1)
    raise AssertionError(f"the workers stopped making progress: "
                         f"{[_acked(o) for o in outs]} < {at_least}")


def check_register(store: MemoryStore, outs: list[Path]) -> dict[str, int]:
    """Every acknowledged change is there, every present value was written."""
    history: dict[tuple[str, str], list[dict[str, object]]] = {}
    acknowledged = 0
    for out in outs:
        for line in out.read_text().splitlines():
            call = json.loads(line)
            history.setdefault((str(call["agent"]), str(call["key"])), []).append(call)
            acknowledged += bool(call["ok"])
    for (agent, key), calls in history.items():
        last_ok = max((n for n, c in enumerate(calls) if c["ok"]), default=-1)
        allowed = {calls[last_ok]["value"] if last_ok >= 0 else None}
        allowed |= {c["value"] for c in calls[last_ok + 1:] if not c["ok"]}
        if last_ok < 0:
            allowed |= {c["value"] for c in calls if not c["ok"]}
        entry = store.deployer(agent).read(key)
        found = entry.value.decode() if entry is not None else None
        assert found in allowed, (agent, key, found, allowed, calls[last_ok:])
    for agent in AGENTS:
        present = {e.key for e in store.deployer(agent).list()}
        assert all((agent, key) in history for key in present), present
        report = verify_agent(store, agent)
        assert report.ok, report.message
    return {"acknowledged": acknowledged, "calls": sum(len(c) for c in history.values())}


def run_register(pair: Cluster, tmp_path: Path, failovers: int, workers: int = 3
                 ) -> dict[str, int]:
    rotifer_dir = tmp_path / ".rotifer"
    with MemoryStore.open(rotifer_dir, pair.url()) as store:
        for agent in AGENTS:
            store.create_agent(agent)
    procs, outs, stop = _workers(pair, rotifer_dir, workers, tmp_path)
    rng = random.Random(failovers)
    try:
        _wait_for_acks(outs, [20] * workers, procs)
        for _ in range(failovers):
            time.sleep(rng.uniform(0.05, 0.8))  # a random moment in the stream of calls
            pair.fail_over()
            _wait_for_acks(outs, [_acked(o) + 10 for o in outs], procs)
    finally:
        stop.touch()
        for proc in procs:
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    for proc in procs:
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        assert proc.returncode == 0, err
    with MemoryStore.open(rotifer_dir, pair.url()) as store:
        figures = check_register(store, outs)
    figures["failovers"] = pair.failovers
    return figures
