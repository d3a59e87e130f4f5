"""Every call ends within the bound the deployer sets (``rotifer_timeout``).

Frozen servers (SIGSTOP of the postmaster and every backend), servers that
accept connections and never answer, killed and restarted servers, and a
process whose threads want more connections than its cap: each call ends in
MEMORY_STORAGE_ERROR within the bound, nothing is half written, and the same
store works again by itself once the server is back.  These use a server of
their own (``own_pg_server``), never the session's shared one.

The elapsed-time checks are bounds with generous slack (the bound is 2 s;
the check allows 6), not speed measurements.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore

from .conftest import PgServer
from .helpers import gene_id

pytestmark = pytest.mark.postgres

BOUND_S = 2.0
SLACK_S = 4.0


def _bounded(url: str) -> str:
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}rotifer_timeout={BOUND_S:g}"


def storage_error_within_bound(fn: Callable[[], object]) -> AgentMemoryError:
    started = time.monotonic()
    with pytest.raises(AgentMemoryError) as info:
        fn()
    elapsed = time.monotonic() - started
    assert info.value.code is ErrorCode.STORAGE_ERROR, info.value
    assert elapsed < BOUND_S + SLACK_S, (elapsed, info.value)
    return info.value


def check_consistent(store: MemoryStore, agent: str) -> None:
    used, quota = store.usage(agent)
    with store.backend.read() as tx:
        assert tx.sum_sizes(agent) == used <= quota


@pytest.fixture
def store(own_pg_server: PgServer, tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore.open(tmp_path / ".rotifer", url=_bounded(own_pg_server.url())) as s:
        s.create_agent("a", quota_bytes=10_000)
        yield s


def test_a_frozen_server_ends_every_call_within_the_bound(own_pg_server: PgServer,
                                                          store: MemoryStore,
                                                          tmp_path: Path) -> None:
    mem = store.for_gene("a", gene_id("g"), "d")
    mem.write_memory("d/before", b"1", "PATTERN")
    own_pg_server.signal(signal.SIGSTOP)
    try:
        storage_error_within_bound(lambda: mem.write_memory("d/during", b"2", "PATTERN"))
        err = storage_error_within_bound(lambda: mem.read_memory("d/before"))
        assert "did not answer within 2 s" in str(err)
        storage_error_within_bound(lambda: mem.query_memory())
        storage_error_within_bound(lambda: store.deployer("a").delete_category("CACHE"))
        # A new process's open (a fresh connection) is bounded too.
        storage_error_within_bound(
            lambda: MemoryStore.open(tmp_path / "other", url=_bounded(own_pg_server.url())))
    finally:
        own_pg_server.signal(signal.SIGCONT)
    # The same store recovers by itself; the cut-off write left nothing behind.
    assert mem.read_memory("d/during") is None
    entry = mem.read_memory("d/before")
    assert entry is not None and entry.value == b"1"
    mem.write_memory("d/after", b"3", "PATTERN")
    check_consistent(store, "a")


def test_a_server_that_never_answers_is_bounded(tmp_path: Path) -> None:
    """Accepts TCP connections (the kernel does) and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        url = f"postgresql://u:secret@127.0.0.1:{port}/db?rotifer_timeout={BOUND_S:g}"
        err = storage_error_within_bound(lambda: MemoryStore.open(tmp_path, url=url))
        assert "secret" not in str(err)


def _load(store: MemoryStore, n: int, stop: threading.Event,
          outcomes: dict[str, int], lock: threading.Lock) -> None:
    mem = store.for_gene("a", gene_id(f"w{n}"), "d")
    i = 0
    while not stop.is_set():
        i += 1
        started = time.monotonic()
        try:
            if i % 3:
                mem.write_memory(f"d/{n}/{i % 13}", b"x" * (50 + i % 200), "CACHE")
            else:
                mem.query_memory({"limit": 20})
            kind = "ok"
        except AgentMemoryError as exc:
            kind = exc.code.value
        took = time.monotonic() - started
        with lock:
            outcomes[kind] = outcomes.get(kind, 0) + 1
            outcomes["slowest_ms"] = max(outcomes.get("slowest_ms", 0), int(took * 1000))
        if kind != "ok":
            time.sleep(0.05)


def _run_load_through(fault: Callable[[], None], store: MemoryStore) -> dict[str, int]:
    stop = threading.Event()
    lock = threading.Lock()
    outcomes: dict[str, int] = {}
    threads = [threading.Thread(target=_load, args=(store, n, stop, outcomes, lock))
               for n in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        fault()
        time.sleep(2.0)  # and the workers go on after it
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not any(t.is_alive() for t in threads)
    return outcomes


def test_freezing_the_server_under_load(own_pg_server: PgServer, store: MemoryStore) -> None:
    def freeze() -> None:
        own_pg_server.signal(signal.SIGSTOP)
        time.sleep(BOUND_S + 2)
        own_pg_server.signal(signal.SIGCONT)

    outcomes = _run_load_through(freeze, store)
    assert outcomes.get("MEMORY_STORAGE_ERROR", 0) > 0, outcomes
    assert set(outcomes) <= {"ok", "MEMORY_STORAGE_ERROR", "slowest_ms"}, outcomes
    assert outcomes["slowest_ms"] < (BOUND_S + SLACK_S) * 1000, outcomes
    store.for_gene("a", gene_id("after"), "d").write_memory("d/after", b"1", "PATTERN")
    check_consistent(store, "a")


def test_killing_and_restarting_the_server_under_load(own_pg_server: PgServer,
                                                      store: MemoryStore) -> None:
    def crash() -> None:
        own_pg_server.signal(signal.SIGKILL)
        time.sleep(1.0)
        own_pg_server.restart()

    outcomes = _run_load_through(crash, store)
    assert outcomes.get("MEMORY_STORAGE_ERROR", 0) > 0, outcomes
    assert outcomes.get("ok", 0) > 0, outcomes
    assert set(outcomes) <= {"ok", "MEMORY_STORAGE_ERROR", "slowest_ms"}, outcomes
    assert outcomes["slowest_ms"] < (BOUND_S + SLACK_S) * 1000, outcomes
    # Every worker's very next call after the restart works: no stale connection left.
    mem = store.for_gene("a", gene_id("after"), "d")
    mem.write_memory("d/after", b"1", "PATTERN")
    assert [e.key for e in mem.query_memory({"keyPrefix": "d/after"})] == ["d/after"]
    check_consistent(store, "a")


def _count_sessions(admin_url: str, app: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                           (app,)).fetchone()
    return int(str(row[0])) if row else 0


def test_connections_are_capped_per_process_and_shared(pg_fresh_url: str, pg_url: str,
                                                       tmp_path: Path) -> None:
    app = "cap" + uuid.uuid4().hex[:8]
    url = f"{pg_fresh_url}&application_name={app}&rotifer_pool_size=3&rotifer_timeout=20"
    stores = [MemoryStore.open(tmp_path, url=url) for _ in range(3)]
    stores[0].create_agent("a", quota_bytes=10**7)
    assert stores[0].backend.connections is stores[2].backend.connections  # type: ignore[attr-defined]
    peak = 0
    stop = threading.Event()
    failures: list[BaseException] = []

    def work(n: int) -> None:
        try:
            mem = stores[n % 3].for_gene("a", gene_id(f"g{n}"), "d")
            for i in range(25):
                mem.write_memory(f"d/{n}/{i % 5}", b"v" * 100, "PATTERN")
                mem.query_memory({"limit": 5})
        except BaseException as exc:
            failures.append(exc)

    def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _count_sessions(pg_url, app))
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=work, args=(n,)) for n in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stop.set()
    watcher.join(30)
    assert not failures, failures[:3]
    assert 1 <= peak <= 3
    for s in stores:
        s.close()


def test_waiting_for_a_connection_ends_at_the_bound(pg_fresh_url: str, tmp_path: Path) -> None:
    url = f"{pg_fresh_url}&rotifer_pool_size=2&rotifer_timeout={BOUND_S:g}"
    store = MemoryStore.open(tmp_path, url=url)
    for agent in ("a", "b", "c"):
        store.create_agent(agent)
    # Both connections busy, longer than the bound (as a move may be).
    with store.backend.long_running(), store.backend.write("a"), store.backend.write("b"):
        err = storage_error_within_bound(
            lambda: store.for_gene("c", gene_id("g"), "d").write_memory("d/k", b"1", "CACHE"))
        assert "rotifer_pool_size" in str(err)
    store.for_gene("c", gene_id("g"), "d").write_memory("d/k", b"1", "CACHE")
    store.close()


def test_a_long_running_transaction_is_bounded_per_statement(own_pg_server: PgServer,
                                                             store: MemoryStore) -> None:
    """A move holds one transaction longer than the bound; each statement stays bounded."""
    backend = store.backend
    frozen_at = 0.0

    def hold_then_freeze() -> None:
        nonlocal frozen_at
        with backend.long_running(), backend.write("a") as tx:
            time.sleep(BOUND_S + 0.5)  # longer than a call may take: still usable
            assert tx.count("a") == 0
            own_pg_server.signal(signal.SIGSTOP)
            frozen_at = time.monotonic()
            tx.count("a")

    try:
        with pytest.raises(AgentMemoryError) as info:
            hold_then_freeze()
        assert time.monotonic() - frozen_at < BOUND_S + SLACK_S
    finally:
        own_pg_server.signal(signal.SIGCONT)
    assert info.value.code is ErrorCode.STORAGE_ERROR
    assert "did not answer within" in str(info.value)
    check_consistent(store, "a")
