"""PostgreSQL failover: nothing acknowledged is lost, nothing is invented.

A real primary and a real streaming standby on loopback (:mod:`tests.pg_failover`),
reached through one libpq multi-host URL.  The primary is SIGKILLed and the
standby promoted with ``pg_ctl promote``, as an operator or pg_auto_failover
does when the primary's machine dies.

The register test (:mod:`tests.failover.register`) is in the style of
Jepsen's: worker processes write and
delete their own keys across three agents and record what each call was told;
after the failovers every acknowledged change must be there (up to the calls
after it that failed, which may or may not have happened), every value there
must be one some call wrote, and ``audit verify`` must pass on every agent.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore
from rotifer.memory.audit.verify import verify_agent
from tests.pg_failover import PgPair
from tests.pg_servers import find_pg_bindir

from .register import run_register
from .worker import GENE

pytestmark = pytest.mark.postgres

def _pair(sync: bool) -> Iterator[PgPair]:
    if os.environ.get("ROTIFER_TEST_PG_URL"):
        pytest.skip("needs the PostgreSQL binaries to start servers of its own")
    bindir = find_pg_bindir()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("no PostgreSQL server binaries (CI must run the failover tests)")
        pytest.skip("no PostgreSQL server binaries")
    pair = PgPair(bindir, sync=sync)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


@pytest.fixture
def sync_pair() -> Iterator[PgPair]:
    yield from _pair(sync=True)


@pytest.fixture
def async_pair() -> Iterator[PgPair]:
    yield from _pair(sync=False)


def _open(pair: PgPair, rotifer_dir: Path, **params: str) -> MemoryStore:
    return MemoryStore.open(rotifer_dir, pair.url(**params))


def _in_thread(call: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Start ``call`` in a thread; its outcome lands in the list: ``"ok"``, or the
    AgentMemoryError it raised."""
    outcome: list[object] = []

    def run() -> None:
        try:
            call()
            outcome.append("ok")
        except AgentMemoryError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


# -- one process across a failover --------------------------------------------


def test_a_call_made_while_no_primary_answers_waits_for_the_new_one(
        sync_pair: PgPair, tmp_path: Path) -> None:
    """The long-lived process of the issue: it never wrote again after the
    failover.  A call made between the primary's death and the promotion now
    waits for the new primary (within its bound) and succeeds; so do all later
    ones, with no restart; and the log verifies."""
    store = _open(sync_pair, tmp_path / ".rotifer")
    store.create_agent("a")
    gene = store.for_gene("a", GENE, "failover")
    gene.write_memory("before", b"1", "CONTEXT")
    old, new = sync_pair.node(sync_pair.primary), sync_pair.node(sync_pair.standby)
    old.kill()
    writer, outcome = _in_thread(lambda: gene.write_memory("during", b"2", "CONTEXT"))
    time.sleep(1.0)  # the call is waiting: only a standby answers now
    assert outcome == []
    new.promote()
    writer.join(60)
    assert outcome == ["ok"]
    gene.write_memory("after", b"3", "CONTEXT")
    entry = gene.read_memory("before")
    assert entry is not None and entry.value == b"1"
    assert {e.key for e in gene.query_memory({})} == {"before", "during", "after"}
    assert verify_agent(store, "a").ok
    store.close()


def test_with_one_plain_server_a_refused_connection_is_reported_at_once(
        tmp_path: Path) -> None:
    """Waiting is for URLs that name a primary and standbys; a single server
    that refuses is reported at once, as before (here: a closed port)."""
    from tests.pg_servers import free_port

    url = f"postgresql://rotifer@127.0.0.1:{free_port()}/rotifer"
    started = time.monotonic()
    with pytest.raises(AgentMemoryError) as info:
        MemoryStore.open(tmp_path / ".rotifer", url)
    assert info.value.code is ErrorCode.STORAGE_ERROR
    assert "cannot connect" in str(info.value)
    # Not a timing assertion on speed: the bound is 30 s and a wait would take it.
    assert time.monotonic() - started < 25


# -- synchronous commits that the standby never confirmed ----------------------


def _lose_in_flight(pair: PgPair, receivers: list[int]) -> None:
    """The stopped WAL receivers die with what the dead primary had sent them
    still unread in their sockets: the standby never got it.  (Resumed, they
    would read it from the kernel's buffer.)  The standby's postmaster restarts
    after the crash of its child; it is promoted once it answers again (a
    promotion asked while it restarts would be lost)."""
    for pid in receivers:
        os.kill(pid, signal.SIGKILL)
    standby = pair.node(pair.standby)
    deadline = time.monotonic() + 60
    time.sleep(0.2)  # the postmaster notices its child's death and restarts
    while time.monotonic() < deadline:
        try:
            if standby.sql("SELECT pg_is_in_recovery()") == [(True,)]:
                return
        except psycopg.Error:
            pass
        time.sleep(0.1)
    raise AssertionError("the standby did not come back after its WAL receiver died")


def _sync_waiter(pair: PgPair) -> int:
    """The pid of a backend waiting for its synchronous standby (or 0)."""
    rows = pair.node(pair.primary).sql(
        "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
    return int(rows[0][0]) if rows else 0  # type: ignore[call-overload]


@pytest.mark.parametrize("protected", [True, False], ids=["protected", "switched-off"])
def test_a_commit_the_standby_never_confirmed_is_not_acknowledged(
        sync_pair: PgPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        protected: bool) -> None:
    """PostgreSQL answers a COMMIT whose wait for the synchronous standby was
    cancelled with success and a WARNING; the change then lives on the primary
    alone and a failover loses it.  rotifer reports MEMORY_STORAGE_ERROR instead
    (switched off, the same call "succeeds" and the change is lost)."""
    if not protected:
        monkeypatch.setattr("rotifer.memory.storage.postgres.backend.unconfirmed", lambda conn: False)
    store = _open(sync_pair, tmp_path / ".rotifer")
    store.create_agent("a")
    gene = store.for_gene("a", GENE, "failover")
    gene.write_memory("kept", b"1", "CONTEXT")
    receivers = sync_pair.walreceiver_pids()
    assert receivers
    for pid in receivers:
        os.kill(pid, signal.SIGSTOP)  # the standby stops confirming
    writer, outcome = _in_thread(lambda: gene.write_memory("unconfirmed", b"2", "CONTEXT"))
    deadline = time.monotonic() + 20
    while not (pid := _sync_waiter(sync_pair)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid, "the commit never waited for the standby"
    sync_pair.node(sync_pair.primary).sql(f"SELECT pg_cancel_backend({pid})")
    writer.join(30)
    sync_pair.node(sync_pair.primary).kill()
    _lose_in_flight(sync_pair, receivers)
    sync_pair.node(sync_pair.standby).promote()
    sync_pair.primary = sync_pair.standby
    assert gene.read_memory("kept") is not None
    assert gene.read_memory("unconfirmed") is None  # lost with the old primary
    if protected:
        assert len(outcome) == 1 and isinstance(outcome[0], AgentMemoryError)
        assert outcome[0].code is ErrorCode.STORAGE_ERROR
        assert "did not confirm" in str(outcome[0])
    else:
        assert outcome == ["ok"]  # acknowledged, and gone: what the protection stops
    store.close()


def test_asynchronous_replication_loses_what_it_acknowledged(
        async_pair: PgPair, tmp_path: Path) -> None:
    """What docs/backends.md warns of: with asynchronous replication a change
    the primary acknowledged but had not yet sent is gone after a failover."""
    store = _open(async_pair, tmp_path / ".rotifer")
    store.create_agent("a")
    gene = store.for_gene("a", GENE, "failover")
    gene.write_memory("sent", b"1", "CONTEXT")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # "sent" has reached the standby
        rows = async_pair.node(async_pair.primary).sql(
            "SELECT replay_lsn = pg_current_wal_lsn() FROM pg_stat_replication")
        if rows == [(True,)]:
            break
        time.sleep(0.05)
    receivers = async_pair.walreceiver_pids()
    for pid in receivers:
        os.kill(pid, signal.SIGSTOP)
    gene.write_memory("acknowledged", b"2", "CONTEXT")  # returns: acknowledged
    async_pair.node(async_pair.primary).kill()
    _lose_in_flight(async_pair, receivers)
    async_pair.node(async_pair.standby).promote()
    assert gene.read_memory("sent") is not None
    assert gene.read_memory("acknowledged") is None
    store.close()


# -- the register test ----------------------------------------------------------


def test_register_across_two_failovers(sync_pair: PgPair, tmp_path: Path) -> None:
    figures = run_register(sync_pair, tmp_path, failovers=2)
    assert figures["failovers"] == 2 and figures["acknowledged"] > 0


@pytest.mark.slow
def test_register_across_ten_failovers(sync_pair: PgPair, tmp_path: Path) -> None:
    figures = run_register(sync_pair, tmp_path, failovers=10, workers=4)
    print("failover register:", figures)
    assert figures["failovers"] == 10

