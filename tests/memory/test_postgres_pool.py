"""The pool's bookkeeping, each piece by what it stops: a waiting thread is
woken by a give-back, a connection the server hung up on is never handed out,
and a forked child neither uses the parent's connections nor goes unwatched.

The pool keeps these cheaply (issue 33: one poll object per connection, a
count of waiting threads, the process id kept by a fork hook), so each test
fails if its piece is taken away.  A real server; the waits are generous
bounds, not speed checks.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from typing import Any

import psycopg
import pytest

from rotifer.memory.storage.postgres import connection
from rotifer.memory.storage.postgres.connection import Connection, Connections
from rotifer.memory.storage.postgres.settings import parse
from rotifer.memory.storage.postgres.watchdog import Watchdog

pytestmark = pytest.mark.postgres

PATIENCE_S = 60.0


def _url(pg_url: str, params: str) -> str:
    return f"{pg_url}{'&' if '?' in pg_url else '?'}{params}"


def test_a_thread_waiting_for_the_only_connection_gets_it_when_it_is_given_back(
        pg_url: str) -> None:
    pool = Connections(parse(_url(pg_url, "rotifer_pool_size=1&rotifer_timeout=600")))
    try:
        held = pool.take(time.monotonic() + 600)
        got: list[Connection] = []
        waiter = threading.Thread(target=lambda: got.append(pool.take(time.monotonic() + 600)),
                                  daemon=True)
        waiter.start()
        while not pool._waiting and waiter.is_alive():  # it waits on the pool now
            time.sleep(0.01)
        pool.give_back(held)  # wakes it (else it would wait its 600 s)
        waiter.join(PATIENCE_S)
        assert got == [held]
        pool.give_back(got[0])
        assert pool._waiting == 0
    finally:
        pool.close()


def test_an_idle_connection_the_server_hung_up_on_is_never_handed_out(
        pg_url: str, admin: psycopg.Connection[tuple[object, ...]]) -> None:
    pool = Connections(parse(pg_url))
    try:
        deadline = time.monotonic() + 600
        conn = pool.take(deadline)
        pid = conn.info.backend_pid
        pool.give_back(conn)
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        until = time.monotonic() + PATIENCE_S  # the server's last word reaches the socket
        while not select.select([conn.pgconn.socket], [], [], 0.05)[0]:
            assert time.monotonic() < until
        taken = pool.take(deadline)
        assert taken is not conn and taken.info.backend_pid != pid
        assert taken.execute("SELECT 1").fetchone() == (1,)
        assert conn.closed  # the dead one was dropped, not tried
        pool.give_back(taken)
        assert pool._open_count == len(pool._idle) == 1
    finally:
        pool.close()


def test_a_forked_child_opens_its_own_connection_and_leaves_the_parents(pg_url: str) -> None:
    pool = Connections(parse(pg_url))
    try:
        deadline = time.monotonic() + 600
        conn = pool.take(deadline)
        parent_pid = conn.info.backend_pid
        pool.give_back(conn)  # idle in the pool when the process forks
        read, write = os.pipe()
        child = os.fork()
        if child == 0:
            code = 1
            try:
                mine = pool.take(time.monotonic() + 60)
                os.write(write, str(mine.info.backend_pid).encode())
                pool.give_back(mine)
                pool.close()  # closes the child's connection, never the parent's
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read) as pipe:
            child_pid = int(pipe.read() or 0)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert child_pid not in (0, parent_pid)
        again = pool.take(deadline)  # the parent's own, still open and working
        assert again is conn and again.execute("SELECT 1").fetchone() == (1,)
        pool.give_back(again)
    finally:
        pool.close()


def test_a_forked_childs_watchdog_cuts_off_at_the_deadline(pg_url: str) -> None:
    """The watching thread stays in the parent: the child's first arm starts its own."""
    dog = Watchdog()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        dog.arm(conn, time.monotonic() + 3600)  # the parent's thread runs
        dog.disarm(conn)
    child = os.fork()
    if child == 0:
        code = 1
        try:
            with psycopg.connect(pg_url, autocommit=True) as mine:
                dog.arm(mine, time.monotonic() + 0.2)
                try:
                    mine.execute("SELECT pg_sleep(30)")  # unwatched, it would finish
                except psycopg.OperationalError:
                    code = 0 if dog.disarm(mine) else 2
        finally:
            os._exit(code)
    assert _exit_code_within(child, PATIENCE_S) == 0


def _exit_code_within(child: int, seconds: float) -> int | None:
    """The child's exit code, or None (and the child killed) if it is still
    running after ``seconds``: a deadlocked child."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    return None


@pytest.mark.parametrize("lock", ["pool", "watchdog", "registry"])
def test_a_lock_another_thread_holds_at_the_fork_is_free_in_the_child(
        pg_url: str, lock: str) -> None:
    """A thread of the parent inside a pool or watchdog call when another
    forks: that thread is not in the child, so the lock it held would stay
    held there for ever and the child's first call would hang."""
    pool = Connections(parse(pg_url))
    dog = Watchdog()
    held_lock: Any = {"pool": pool._lock, "watchdog": dog._lock,
                 "registry": connection._REGISTRY_LOCK}[lock]
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with held_lock:
            held.set()
            release.wait(PATIENCE_S)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(PATIENCE_S)
        child = os.fork()
        if child == 0:
            code = 1
            try:
                if lock == "pool":
                    pool.give_back(pool.take(time.monotonic() + 60))
                elif lock == "watchdog":
                    conn = object()  # arming only files it under its deadline
                    dog.arm(conn, time.monotonic() + 3600)  # type: ignore[arg-type]
                    dog.disarm(conn)  # type: ignore[arg-type]
                else:
                    Connections.acquire(pg_url).release()
                code = 0
            finally:
                os._exit(code)
        assert _exit_code_within(child, PATIENCE_S) == 0  # None: the child hung
    finally:
        release.set()
        holder.join()
        pool.close()
