"""Many workers on PostgreSQL, with a server crash in the middle.

8 processes make mixed calls (writes that evict under a small quota,
PREFERENCE writes, deletes, reads, queries, a deployer clearing CACHE) on three
agents of a server of the test's own.  The run has three phases:

1. load; then every worker pauses and the state is checked;
2. load while the server is killed (SIGKILL of every process) and restarted:
   calls fail with MEMORY_STORAGE_ERROR within the bound and the workers
   recover by themselves; then every worker pauses and the state is checked;
3. load; then the final state is checked.

Checked at each pause: used_bytes equals the sum of the entries' sizes, no
agent over its quota, every PREFERENCE a worker wrote is still there (never
evicted) with the value of its last successful write (or of a later write
whose outcome the crash made unknown).  Across phases 1 and 3 the audit log
is replayed through a model of the rules -- quota never exceeded after any
change, every eviction exactly the entries the rules pick -- and must end in
exactly the stored state.  Phase 2 is not replayed: a change cut off at its
commit by the crash may have its (write-ahead) audit line without having
happened, which the log's contract allows.

``test_many_workers_short`` runs in ``make test`` (~25 s);
``test_many_workers_long`` is the slow version (minutes, also through pgbouncer).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore, parse_time
from rotifer.memory.audit import MAX_BYTES_ENV, archives
from tests.audit_reading import all_audit_lines

from .conftest import PgBouncer, PgServer, find_pgbouncer
from .helpers import Live, cleanup_victims, gene_id

pytestmark = pytest.mark.postgres

WORKERS = 8
AGENTS = ("a0", "a1", "a2")
QUOTA = 4000
SHARED_KEYS = 30
BOUND_S = 3


def _worker(url: str, rot: str, n: int, control: dict[str, Any], results: Any) -> None:
    rng = random.Random(7000 + n)
    counts: dict[str, int] = {}
    # Per PREFERENCE key: [the last successful value or None, later values of unknown fate].
    prefs: dict[tuple[str, str], list[bytes | None]] = {}
    pauses = 0
    with MemoryStore.open(Path(rot), url=url) as store:
        i = 0
        while not control["stop"].is_set():
            if control["pause"].is_set():
                pauses += 1
                with control["paused"].get_lock():
                    control["paused"].value += 1
                while control["pause"].is_set() and not control["stop"].is_set():
                    time.sleep(0.01)
                continue
            i += 1
            agent = AGENTS[rng.randrange(len(AGENTS))]
            roll = rng.random()
            kind = "?"
            pref_key: tuple[str, str] | None = None
            value = b""
            try:
                mem = store.for_gene(agent, gene_id(f"w{n}"), "load")
                if roll < 0.5:
                    kind = "write"
                    mem.write_memory(f"k/{rng.randrange(SHARED_KEYS)}",
                                     bytes([n]) * rng.randint(40, 400),
                                     rng.choice(["CACHE"] * 5 + ["PATTERN"] * 3 + ["CONTEXT"] * 2))
                elif roll < 0.56:
                    kind = "pref"
                    key = f"p/{n}/{rng.randrange(5)}"
                    pref_key, value = (agent, key), f"{n}:{i}".encode()
                    mem.write_memory(key, value, "PREFERENCE")
                    prefs[pref_key] = [value]
                elif roll < 0.68:
                    kind = "delete"
                    mem.delete_memory(f"k/{rng.randrange(SHARED_KEYS)}")
                elif roll < 0.84:
                    kind = "read"
                    mem.read_memory(f"k/{rng.randrange(SHARED_KEYS)}")
                elif roll < 0.995:
                    kind = "query"
                    found = mem.query_memory({"keyPrefix": "k/", "limit": 100})
                    assert sum(e.size for e in found) <= QUOTA
                else:
                    kind = "clear"
                    store.deployer(agent).delete_category("CACHE")
                outcome = "ok"
            except AgentMemoryError as exc:
                outcome = exc.code.value
                if exc.code is ErrorCode.STORAGE_ERROR and pref_key is not None:
                    prefs.setdefault(pref_key, [None]).append(value)  # may have happened
                if exc.code not in (ErrorCode.QUOTA_EXCEEDED, ErrorCode.NOT_FOUND,
                                    ErrorCode.STORAGE_ERROR):
                    results.put(("error", n, repr(exc)))
                    raise
                if exc.code is ErrorCode.STORAGE_ERROR:
                    time.sleep(0.05)
            counts[f"{kind}:{outcome}"] = counts.get(f"{kind}:{outcome}", 0) + 1
    results.put(("ok", n, counts, {f"{a}\x00{k}": v for (a, k), v in prefs.items()}))


class Workers:
    def __init__(self, url: str, rot: Path) -> None:
        ctx = mp.get_context("spawn")
        self.control = {"stop": ctx.Event(), "pause": ctx.Event(), "paused": ctx.Value("i", 0)}
        self.results = ctx.Queue()
        self.procs = [ctx.Process(target=_worker, args=(url, str(rot), n, self.control,
                                                        self.results)) for n in range(WORKERS)]
        for p in self.procs:
            p.start()

    def pause(self) -> None:
        with self.control["paused"].get_lock():
            self.control["paused"].value = 0
        self.control["pause"].set()
        deadline = time.monotonic() + 120
        while self.control["paused"].value < WORKERS:
            assert time.monotonic() < deadline, "workers did not pause"
            assert all(p.is_alive() for p in self.procs), "a worker died"
            time.sleep(0.02)

    def resume(self) -> None:
        self.control["pause"].clear()

    def stop(self) -> list[Any]:
        self.control["stop"].set()
        self.control["pause"].clear()
        results = []
        deadline = time.monotonic() + 120
        while len(results) < len(self.procs):
            try:
                results.append(self.results.get(timeout=1))
            except queue.Empty:
                assert time.monotonic() < deadline, "workers did not finish"
                if not any(p.is_alive() for p in self.procs):
                    raise AssertionError(f"workers died: {results}") from None
        for p in self.procs:
            p.join(60)
        return results


def _snapshot(store: MemoryStore) -> dict[str, dict[str, Live]]:
    """The stored state (checked).  Right after a crash a call may still fail
    once on a connection the server dropped; the next one must work."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return _read_state(store)
        except AgentMemoryError as exc:
            if exc.code is not ErrorCode.STORAGE_ERROR or time.monotonic() > deadline:
                raise
            print(f"snapshot retried after: {exc}")
            time.sleep(0.5)


def _read_state(store: MemoryStore) -> dict[str, dict[str, Live]]:
    state: dict[str, dict[str, Live]] = {}
    with store.backend.read() as tx:
        for agent in AGENTS:
            state[agent] = {row.key: Live(row.category.value, row.size, (row.updated_us, row.seq))
                            for row in tx.iter_newest(agent)}
            record = tx.get_agent(agent)
            assert record is not None
            used = sum(e.size for e in state[agent].values())
            assert record.used_bytes == used == tx.sum_sizes(agent) <= QUOTA
    return state


def _replay(lines: list[dict[str, Any]], start: dict[str, dict[str, Live]]
            ) -> dict[str, dict[str, Live]]:
    """Check each change against the rules; return the state the log leads to."""
    state = {agent: dict(entries) for agent, entries in start.items()}
    writes = {agent: max((e.order[1] for e in entries.values()), default=0)
              for agent, entries in state.items()}
    pending: dict[str, list[dict[str, Any]]] = {agent: [] for agent in state}
    for line in lines:
        agent = line["agent"]
        if agent not in state:
            continue
        live, action = state[agent], line["action"]
        if action == "evict":
            pending[agent].append(line)
            continue
        used = sum(e.size for e in live.values())
        if action in ("write", "update", "quota_exceeded"):
            key, size = line["key"], line["bytes"]
            old = live.get(key)
            need = used - (old.size if old else 0) + size - QUOTA
            expected, freeable = cleanup_victims(live, key, need)
            if action == "quota_exceeded":
                assert not pending[agent]
                assert need - freeable > 0, line
                continue
            assert (action == "update") == (old is not None), line
            assert [p["key"] for p in pending[agent]] == expected, (line, pending[agent])
            for p in pending[agent]:
                assert p["bytes"] == live.pop(p["key"]).size
            pending[agent] = []
            writes[agent] += 1
            live[key] = Live(line["category"], size, (parse_time(line["ts"]), writes[agent]))
        elif action in ("delete", "deployer_delete"):
            assert not pending[agent]
            live.pop(line["key"])
        else:
            raise AssertionError(f"unexpected {line}")
        assert sum(e.size for e in live.values()) <= QUOTA, line
    assert not any(pending.values())
    return state


def _same(replayed: dict[str, dict[str, Live]], stored: dict[str, dict[str, Live]]) -> None:
    for agent in AGENTS:
        assert set(replayed[agent]) == set(stored[agent]), agent
        for key, live in stored[agent].items():
            assert (replayed[agent][key].category, replayed[agent][key].size,
                    replayed[agent][key].order[0]) == (live.category, live.size, live.order[0])


def _check_prefs(store: MemoryStore, results: list[Any]) -> int:
    checked = 0
    stored = {(agent, e.key): e for agent in AGENTS for e in store.deployer(agent).list()}
    for result in results:
        for where, values in result[3].items():
            agent, key = where.split("\x00")
            entry = stored.get((agent, key))
            if entry is None:  # a PREFERENCE is never evicted: only a write that never was
                assert values[0] is None, (agent, key)
            elif len(values) == 1:
                assert entry.value == values[0], (agent, key)
            else:
                assert entry.value in values, (agent, key)
            checked += 1
    return checked


def run_load(url: str, server: PgServer, tmp_path: Path, phase_s: float) -> dict[str, Any]:
    rot = tmp_path / ".rotifer"
    with MemoryStore.open(rot, url=url) as store:
        for agent in AGENTS:
            store.create_agent(agent, quota_bytes=QUOTA)
        workers = Workers(url, rot)
        try:
            time.sleep(phase_s)  # phase 1
            workers.pause()
            first = _snapshot(store)
            lines_1 = len(all_audit_lines(rot))
            _same(_replay(all_audit_lines(rot)[:lines_1], {a: {} for a in AGENTS}), first)
            workers.resume()

            time.sleep(phase_s / 3)  # phase 2: crash under load
            server.signal(signal.SIGKILL)
            killed = time.monotonic()
            time.sleep(1.0)
            server.restart()
            restarted = time.monotonic()
            time.sleep(phase_s * 2 / 3)
            workers.pause()
            second = _snapshot(store)
            lines_2 = len(all_audit_lines(rot))
            workers.resume()

            time.sleep(phase_s)  # phase 3
            workers.pause()
        except BaseException:
            workers.stop()
            raise
        results = workers.stop()
        errors = [r for r in results if r[0] != "ok"]
        assert not errors, errors
        final = _snapshot(store)
        _same(_replay(all_audit_lines(rot)[lines_2:], second), final)
        prefs = _check_prefs(store, results)
    counts: dict[str, int] = {}
    for result in results:
        for k, v in result[2].items():
            counts[k] = counts.get(k, 0) + v
    calls = sum(counts.values())
    failed = sum(v for k, v in counts.items() if k.endswith("MEMORY_STORAGE_ERROR"))
    assert failed > 0  # the crash was felt
    assert counts.get("write:ok", 0) > 0 and counts.get("query:ok", 0) > 0
    summary = {"calls": calls, "storage_errors": failed, "prefs_checked": prefs,
               "outage_s": round(restarted - killed, 1),
               "calls_per_s": round(calls / (3 * phase_s + 1), 1), "counts": counts}
    print(f"\n{WORKERS} workers, {phase_s:g}s phases: {summary}")
    return summary


def _bounded(url: str) -> str:
    return f"{url}?rotifer_timeout={BOUND_S}&rotifer_pool_size=2"


def test_many_workers_short(own_pg_server: PgServer, tmp_path: Path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    # The log rolls over during the run (as a long run's does at the default
    # 64 MiB): the replay reads the rolled-over files too.
    monkeypatch.setenv(MAX_BYTES_ENV, str(256 << 10))
    run_load(_bounded(own_pg_server.url()), own_pg_server, tmp_path, phase_s=4)
    assert archives(tmp_path / ".rotifer" / "audit.jsonl")


@pytest.mark.slow
@pytest.mark.parametrize("via", ["direct", "pgbouncer"])
def test_many_workers_long(own_pg_server: PgServer, tmp_path: Path, via: str) -> None:
    url = _bounded(own_pg_server.url())
    bouncer: PgBouncer | None = None
    if via == "pgbouncer":
        binary = find_pgbouncer()
        if binary is None:
            pytest.skip("no pgbouncer")
        bouncer = PgBouncer(binary, own_pg_server.port, own_pg_server.run_as)
        bouncer.start()
        url = (f"{bouncer.url('transaction')}&rotifer_timeout={BOUND_S}"
               "&rotifer_pool_size=2")
    try:
        run_load(url, own_pg_server, tmp_path, phase_s=60)
    finally:
        if bouncer is not None:
            bouncer.stop()
