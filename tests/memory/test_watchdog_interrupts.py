"""A stop signal at any moment of the PostgreSQL watchdog's arm, disarm or
suspend, or of the connection pool's take, give_back or discard, leaves their
locks free and no connection out of the pool for nobody.

The defect: a KeyboardInterrupt (Ctrl-C in a long-lived process, or a trusted
gene's deadline raised as one) landing between taking the watchdog's lock and
entering the block that releases it left the lock owned by the interrupted
thread for good; every other thread's next PostgreSQL call then waited for
ever (a clean-clone CI run hung that way in tests/memory/test_concurrency_pg.py).
Here the signal lands at every point of each call where CPython runs pending
handlers (tests/interrupts.py); the watchdog needs no server, since arming
only files the connection under its deadline.
"""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rotifer.memory.signals import signals_deferred
from rotifer.memory.storage.postgres.connection import Connection, Connections
from rotifer.memory.storage.postgres.settings import parse
from rotifer.memory.storage.postgres.watchdog import Watchdog
from tests.interrupts import interrupt_at

FAR = time.monotonic() + 86_400.0  # a deadline no test reaches: nothing is ever cut here


def _raise(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # as a trusted gene's deadline raises (rotifer.genes.python)


@pytest.fixture
def alarm_raises() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _raise)
    yield
    signal.signal(signal.SIGALRM, previous)


def _free_for_another_thread(lock: threading.Condition) -> bool:
    """Whether a thread other than this one can take ``lock`` (an RLock taken by
    this thread would let this thread in again and prove nothing)."""
    got: list[bool] = []

    def take() -> None:
        ok = lock.acquire(timeout=10)  # a free lock is taken at once
        got.append(ok)
        if ok:
            lock.release()

    thread = threading.Thread(target=take)
    thread.start()
    thread.join()
    return got == [True]


def _calls(dog: Watchdog, conn: Any) -> dict[str, Callable[[], object]]:
    return {"arm": lambda: dog.arm(conn, FAR),
            "disarm": lambda: dog.disarm(conn),
            "suspend": lambda: dog.suspend(conn)}


@pytest.mark.usefixtures("alarm_raises")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGALRM], ids=["SIGINT", "SIGALRM"])
@pytest.mark.parametrize("call", ["arm", "disarm", "suspend"])
def test_a_signal_at_every_point_of_a_call_leaves_the_lock_free(call: str, sig: int) -> None:
    handlers = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)]
    dog = Watchdog()
    conn = object()
    dog.arm(conn, FAR)  # the watching thread is started once, outside the measured call
    total, _ = interrupt_at(0, _calls(dog, conn)[call])
    assert total > 3
    interrupted = 0
    for step in range(1, total + 1):
        if call != "arm":
            dog.arm(conn, FAR)
        seen, raised = interrupt_at(step, _calls(dog, conn)[call], sig)
        if seen >= step:  # it landed (a call may take fewer points than the first one)
            assert raised, f"{call}: the signal at point {step} was lost"
            interrupted += 1
        assert _free_for_another_thread(dog._cond), f"{call}: lock kept after a signal at point {step}"
        assert [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)] \
            == handlers, f"{call}: a handler was left swapped after a signal at point {step}"
    assert interrupted > 3  # and every one came out: deferred, never dropped
    dog.disarm(conn)
    assert dog._armed == {}  # and the watchdog goes on keeping its books


def _deferred(landed: list[object]) -> bool:
    """Whether the signal landed inside a deferral (its handler only recorded it)."""
    return any(isinstance(getattr(h, "__self__", None), signals_deferred) for h in landed)


@pytest.mark.usefixtures("alarm_raises")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGALRM], ids=["SIGINT", "SIGALRM"])
@pytest.mark.parametrize("call", ["take", "give_back", "discard"])
def test_a_signal_at_every_point_of_a_pool_call_leaves_its_lock_free(
        pg_url: str, call: str, sig: int) -> None:
    """The pool's lock has the same exposure as the watchdog's: held by an
    interrupted main thread, every other thread's next call waits for ever."""
    pool = Connections(parse(pg_url))
    try:
        steps = 0
        for step in range(1, 1000):
            deadline = time.monotonic() + 60
            pool.give_back(pool.take(deadline))  # one idle connection, as between calls
            landed: list[object] = []
            if call == "take":
                taken: list[Connection] = []
                _, raised = interrupt_at(step, functools.partial(pool.take, deadline), sig, landed,
                                         taken)  # type: ignore[arg-type]
                for conn in taken:
                    pool.give_back(conn)
            else:
                conn = pool.take(deadline)
                method = pool.give_back if call == "give_back" else pool.discard
                _, raised = interrupt_at(step, functools.partial(method, conn), sig, landed)
                if raised and not conn.closed and all(c is not conn for c, _ in pool._idle):
                    assert not _deferred(landed), f"{call}: half done after point {step}"
                    pool.give_back(conn)  # raised before the call began: the caller still has it
            assert _free_for_another_thread(pool._cond), f"{call}: lock kept after a signal at point {step}"
            assert pool._open_count == len(pool._idle), \
                f"{call}: a connection left the pool for nobody after a signal at point {step}"
            if not raised:
                break  # past the call's last point
            steps += 1
        assert steps > 3
    finally:
        pool.close()


def test_ctrl_c_still_ends_a_wait_for_a_free_connection(pg_url: str) -> None:
    """The deferral does not make a wait for a free connection deaf: Ctrl-C
    ends it at once, and the pool is whole afterwards."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # else: a hang
    sep = "&" if "?" in pg_url else "?"
    pool = Connections(parse(f"{pg_url}{sep}rotifer_pool_size=1&rotifer_timeout=600"))
    try:
        held = pool.take(time.monotonic() + 600)  # the only place under the cap
        timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            pool.take(time.monotonic() + 600)
        assert time.monotonic() - started < 300  # not the 600 s bound
        timer.join()
        assert _free_for_another_thread(pool._cond)
        pool.give_back(held)
        assert pool._open_count == len(pool._idle) == 1
    finally:
        pool.close()
