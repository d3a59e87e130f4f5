"""The client-side bound: a connection still busy at its deadline is cut off.

Server-side timeouts (``statement_timeout``, ``lock_timeout``) need a server
that runs; TCP keepalives and ``tcp_user_timeout`` need a network that stops
acknowledging.  A frozen server (SIGSTOP, a stuck VM, a pooler waiting for a
free server connection) has a kernel that still acknowledges every byte, so
only the client can bound the wait.  psycopg's waiting cannot be interrupted
from outside, and closing a connection another thread is using is unsafe, so
at the deadline we ``shutdown()`` its socket through a duplicate descriptor:
the blocked call then sees the connection end and fails at once, the
connection is broken and never reused, and the server, when it runs again,
rolls the transaction back because its client is gone.

One thread per process watches every connection in use, sleeping until the
earliest deadline; arming and disarming cost a lock and a dict operation
(the ``RLock`` itself, whose ``with`` runs in C, not the ``Condition``'s
Python ``__enter__``/``__exit__``; and no ``getpid()``: ~3,700 instructions fewer
for an arm and a disarm, 12.9k before).  A forked child starts afresh in a fork
hook rather than by asking ``getpid()`` at every arm: that also gives it a lock
of its own, where before a lock the watching thread held at the fork stayed
held in the child for ever (tests/memory/test_postgres_pool.py).
Arming wakes the thread only when the new deadline comes before the one it
sleeps until: a call's deadline is almost always later than the last one's,
so a call costs no thread switch.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import weakref
from contextlib import suppress
from typing import Any

import psycopg

from ...signals import signals_deferred

Connection = psycopg.Connection[tuple[Any, ...]]


class Watchdog:
    """Cuts off connections that are still in use at their deadline."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # see connection.py: interrupts
        self._cond = threading.Condition(self._lock)
        self._armed: dict[int, tuple[float, Connection]] = {}
        self._fired: set[int] = set()
        self._thread: threading.Thread | None = None
        #: When the thread wakes next by itself (it looks at every deadline then).
        self._wake = math.inf
        _WATCHDOGS.add(self)

    def _forked(self) -> None:
        """In a forked child, from the fork hook (no other thread yet): the
        watching thread stayed in the parent, and so did any owner of the lock."""
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._armed, self._fired, self._thread = {}, set(), None
        self._wake = math.inf

    def arm(self, conn: Connection, deadline: float) -> None:
        """Cut ``conn`` off at ``deadline`` (``time.monotonic()``) unless disarmed first."""
        # The lock is held with the stop signals and SIGALRM deferred: one raised
        # between taking it and the ``with`` block (a gene's deadline, Ctrl-C in a
        # long-lived process) left it owned by the main thread for good, and every
        # other thread's next call waited for ever (seen after the interrupt tests
        # of tests/memory/test_audit_truth.py, in tests/memory/test_concurrency_pg.py).
        with signals_deferred():
            self.arm_deferred(conn, deadline)

    def arm_deferred(self, conn: Connection, deadline: float) -> None:
        """:meth:`arm` for a caller that already defers the signals (the pool,
        taking a connection): one deferral instead of two nested."""
        with self._lock:
            self._armed[id(conn)] = (deadline, conn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="rotifer-pg-watchdog",
                                                daemon=True)
                self._thread.start()
            elif deadline < self._wake:
                self._cond.notify()

    def disarm(self, conn: Connection) -> bool:
        """Stop watching ``conn``; True when it was cut off."""
        with signals_deferred():
            return self.disarm_deferred(conn)

    def disarm_deferred(self, conn: Connection) -> bool:
        """:meth:`disarm` for a caller that already defers the signals (the pool,
        taking a connection back)."""
        key = id(conn)
        with self._lock:
            self._armed.pop(key, None)
            if key in self._fired:
                self._fired.discard(key)
                return True
            return False

    def suspend(self, conn: Connection) -> None:
        """Stop watching ``conn`` for now, remembering whether it was cut off."""
        with signals_deferred(), self._lock:
            self._armed.pop(id(conn), None)

    def _watch(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                for key, (deadline, conn) in list(self._armed.items()):
                    if deadline <= now:
                        del self._armed[key]
                        self._fired.add(key)
                        _cut(conn)
                soonest = min((d for d, _ in self._armed.values()), default=now + 60.0)
                self._wake = soonest
                self._cond.wait(max(0.0, soonest - now))


def _cut(conn: Connection) -> None:
    """Shut the connection's socket down (both ways) without closing its descriptor."""
    with suppress(Exception):
        fd = conn.pgconn.socket
        dup = socket.socket(fileno=os.dup(fd))
        try:
            dup.shutdown(socket.SHUT_RDWR)
        finally:
            dup.close()


_WATCHDOGS: weakref.WeakSet[Watchdog] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for watchdog in list(_WATCHDOGS):
        watchdog._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)

#: The process's watchdog.
WATCHDOG = Watchdog()
