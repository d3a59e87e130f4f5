"""How the backend talks to the server: connections, the pool and retries.

Everything about *getting* a usable connection lives here, apart from the SQL
the store runs on it (:mod:`.transaction`) and the tables (:mod:`.schema`):
one pool per process and database URL, shared by every thread and store of
the process and capped (:data:`~.settings.POOL_SIZE` by default); the deadline
every call carries (:mod:`.watchdog`); what a forked child must never touch;
and which failures are safe to retry.

Why a small pool of our own rather than ``psycopg_pool``: its connections are
opened by background threads, which a forked worker does not inherit, and its
waits end in a bare ``PoolTimeout`` that hides *why* no connection could be
made; ours opens connections in the caller's thread, under the caller's
deadline, and reports the server's own error.
"""

from __future__ import annotations

import os
import select
import threading
import time
import weakref
from contextlib import suppress
from typing import Any, Final

import psycopg

from ...errors import AgentMemoryError, storage
from ...signals import signals_deferred
from .health import UNCONFIRMED, hung_up, poller_of, watch_sync_wait
from .settings import LOCK_TIMEOUT_MS, Settings, first_line, parse
from .watchdog import WATCHDOG

Connection = psycopg.Connection[tuple[Any, ...]]

#: Attempts at beginning a transaction (stale connection, serialization, deadlock).
BEGIN_ATTEMPTS: Final = 5
#: Idle connections kept per pool; more are opened (up to the cap) while threads need them.
MAX_IDLE: Final = 4
#: A pooled connection idle this long is checked before a ``peek()`` uses it.
PING_AFTER_S: Final = 5.0
#: The first and the longest pause between attempts at reaching a primary
#: while a failover is under way (see :meth:`Connections._open`).
RECONNECT_FIRST_S: Final = 0.05
RECONNECT_MAX_S: Final = 1.0


# The states a connection given back must be in to be kept, looked up once:
# through psycopg.pq's enums they cost ~3,000 instructions per give-back.
_CONN_OK: Final = psycopg.pq.ConnStatus.OK
_TX_IDLE: Final = psycopg.pq.TransactionStatus.IDLE
_PIPELINE_OFF: Final = psycopg.pq.PipelineStatus.OFF

class Connections:
    """Connections to one database for one process: a few kept idle, at most
    ``settings.pool_size`` open at once.

    Safe across threads (each borrower gets its own connection) and across
    ``fork()``: a child never uses or closes the connections it inherited.
    Every connection handed out carries the caller's deadline: the watchdog
    cuts it off if it is still in use then.
    """

    def __init__(self, settings: Settings, *, max_idle: int = MAX_IDLE) -> None:
        self.settings = settings
        self.location = settings.location
        self._max_idle = max_idle
        # Re-entrant: an interrupt (Ctrl-C, a gene's deadline) raised just after
        # the lock was taken, before ``with`` could protect it, leaves it held;
        # with a plain Lock the same thread's next call deadlocked (found by the
        # interruption tests).
        # The hot paths take the RLock itself (its ``with`` runs in C), not the
        # Condition's Python ``__enter__``/``__exit__``; the Condition shares it
        # for waiting and waking.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._waiting = 0  # threads in _cond.wait: give_back wakes one only then
        self._idle: list[tuple[Connection, float]] = []  # (connection, idle since)
        # Every connection this pool opened in this process (in use or idle), by
        # id, with the poll object that watches its socket (see hung_up): only
        # these are kept, or closed, here.
        self._pollers: dict[int, select.poll] = {}
        self._open_count = 0  # idle + in use, for the cap
        #: Idle seconds after which ``take(ping=True)`` checks a pooled connection first.
        self.ping_after_s = PING_AFTER_S
        self._inherited: list[Connection] = []  # kept alive, never closed (see _forked)
        self._users = 0  # backends sharing this pool (see acquire)
        self._closed = False
        _POOLS.add(self)

    # -- the process-wide registry -------------------------------------------

    @classmethod
    def acquire(cls, url: str, *, max_idle: int = MAX_IDLE,
                lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> Connections:
        """The process's pool for ``url`` (made on first use); pair with :meth:`release`."""
        settings = parse(url, lock_timeout_ms=lock_timeout_ms)
        key = (settings, max_idle)
        with _REGISTRY_LOCK:
            pool = _REGISTRY.get(key)
            if pool is None or pool._closed:
                pool = _REGISTRY[key] = cls(settings, max_idle=max_idle)
            pool._users += 1
            return pool

    def release(self) -> None:
        """One user fewer; the last one closes the idle connections."""
        with _REGISTRY_LOCK:
            self._users -= 1
            if self._users > 0:
                return
            for key, pool in list(_REGISTRY.items()):
                if pool is self:
                    del _REGISTRY[key]
        self.close()

    # -- connections -----------------------------------------------------------

    def _forked(self) -> None:
        """In a forked child, from the fork hook (no other thread yet): forget
        the parent's connections.

        Closing them would end the parent's sessions, so they are kept, unused;
        one the child gives back is not the child's (not in ``_pollers``), so
        it is neither kept nor closed.  The lock is new: one that a thread of
        the parent held at the fork stays held in the child for ever.  (Before,
        every take asked ``getpid()``, a system call, and the lock was kept.)"""
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._inherited.extend(conn for conn, _ in self._idle)
        self._idle = []
        self._pollers = {}
        self._open_count = 0
        self._waiting = 0  # the parent's waiting threads are not in the child

    def _open(self, deadline: float) -> tuple[Connection, select.poll]:
        """A new connection and its poll object (the caller has reserved a
        place under the cap).

        With a URL that :attr:`~.settings.Settings.awaits_failover`, a failed
        attempt (no server answers, or only standbys) is tried again, backing
        off up to :data:`RECONNECT_MAX_S`, until ``deadline``: a call made
        while a standby is being promoted waits for the new primary instead
        of failing."""
        pause = RECONNECT_FIRST_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self.timed_out()
            try:
                conn = psycopg.connect(
                    self.settings.conninfo, autocommit=True,
                    connect_timeout=max(2, int(left + 0.999)),
                    # Named prepared statements live in one server session; a pooler
                    # may run our next statement in another.
                    prepare_threshold=None if self.settings.pooler != "none" else 5)
                conn.add_notice_handler(watch_sync_wait(id(conn)))
                break
            except psycopg.Error as exc:
                if time.monotonic() >= deadline - 0.01:
                    raise self.timed_out(first_line(exc)) from exc
                if not (self.settings.awaits_failover
                        and isinstance(exc, psycopg.OperationalError)
                        and time.monotonic() + pause < deadline):
                    raise storage(f"cannot connect to the memory database at {self.location}: "
                                  f"{first_line(exc)}") from exc
                time.sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX_S)
        if self.settings.session_state:
            WATCHDOG.arm(conn, deadline)
            try:
                conn.execute(self.settings.settings_sql(""))
            except psycopg.Error as exc:
                fired = WATCHDOG.disarm(conn)
                conn.close()
                if fired:
                    raise self.timed_out(first_line(exc)) from exc
                raise storage(f"the memory database at {self.location} is not usable: "
                              f"{first_line(exc)}") from exc
            WATCHDOG.disarm(conn)
        try:
            poller = poller_of(conn)
        except (OSError, psycopg.Error) as exc:  # no socket: not usable
            with suppress(Exception):
                conn.close()
            raise storage(f"the memory database at {self.location} is not usable: "
                          f"{first_line(exc)}") from exc
        return conn, poller

    def timed_out(self, detail: str = "") -> AgentMemoryError:
        extra = f" ({detail})" if detail else ""
        return storage(f"the memory database at {self.location} did not answer within "
                       f"{self.settings.timeout_s:g} s (rotifer_timeout){extra}")

    def take(self, deadline: float, *, ping: bool = False) -> Connection:
        """A connection from the pool, or a new one, watched until :meth:`give_back`.

        Waits for a free one while the process has ``pool_size`` open, until
        ``deadline``.  With ``ping``, a connection that sat idle longer than
        ``ping_after_s`` is checked first (one round trip) and replaced if the
        server dropped it: ``peek()`` cannot retry its body, while
        ``read()``/``write()`` retry their ``BEGIN`` instead.
        """
        # Deferred signals (memory/signals.py), for the same reason as the
        # watchdog's: an interrupt raised just after a lock is taken, before its
        # ``with`` protects it, leaves it owned by this thread, and every other
        # thread's next call waits for ever; one raised after a connection left
        # the pool, before the caller holds it, loses a place under the cap.  The
        # waits (a free connection, a connect) still end at once on Ctrl-C.
        deferral = signals_deferred()
        conn: Connection | None = None
        try:
            with deferral:
                conn = self._take(deadline, ping, deferral)
        except BaseException:
            if conn is not None:  # the signal came out after the hand-over: give it back
                self.give_back(conn)
            raise
        return conn

    def _take(self, deadline: float, ping: bool, deferral: signals_deferred) -> Connection:
        while True:
            conn: Connection | None = None
            with self._lock:
                while True:
                    if self._closed:
                        raise storage("the memory store is closed")
                    if self._idle:
                        conn, since = self._idle.pop()
                        break
                    if self._open_count < self.settings.pool_size:
                        self._open_count += 1  # reserved; opened below, outside the lock
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise storage(
                            f"no free connection to the memory database at {self.location} "
                            f"within {self.settings.timeout_s:g} s: all "
                            f"{self.settings.pool_size} of this process are busy "
                            "(rotifer_pool_size)")
                    self._waiting += 1
                    try:
                        with deferral.waiting():
                            self._cond.wait(left)
                    finally:
                        self._waiting -= 1
            if conn is None:
                opened: tuple[Connection, select.poll] | None = None
                try:
                    with deferral.waiting():
                        opened = self._open(deadline)
                except BaseException:
                    if opened is not None:  # Ctrl-C as the wait ended: nobody holds it
                        with suppress(Exception):
                            opened[0].close()
                    self._discarded()
                    raise
                conn = opened[0]
                with self._lock:
                    self._pollers[id(conn)] = opened[1]
                WATCHDOG.arm_deferred(conn, deadline)  # take() defers the signals
                return conn
            watching = self._pollers.get(id(conn))
            if watching is None or hung_up(watching):
                self.discard(conn)
                continue
            WATCHDOG.arm_deferred(conn, deadline)
            if not ping or time.monotonic() - since < self.ping_after_s:
                return conn
            try:
                with deferral.waiting():
                    conn.execute("SELECT 1")
                return conn
            except psycopg.Error:
                self.discard(conn)
            except BaseException:  # Ctrl-C while the server answers: nobody holds it
                self.discard(conn)
                raise

    def _discarded(self) -> None:
        with signals_deferred(), self._lock:
            self._open_count = max(0, self._open_count - 1)
            self._cond.notify()

    def discard(self, conn: Connection) -> bool:
        """Close ``conn`` for good; True when the watchdog had cut it off.

        A broken connection usually means the server restarted or the network
        dropped, so the idle ones are closed too rather than tried one by one."""
        with signals_deferred():  # as take: a half-done discard leaks a place
            return self._discard(conn)

    def _discard(self, conn: Connection) -> bool:
        fired = WATCHDOG.disarm_deferred(conn)  # every caller defers the signals
        UNCONFIRMED.discard(id(conn))
        stale: list[tuple[Connection, float]] = []
        with self._lock:
            mine = self._pollers.pop(id(conn), None) is not None
            if mine:
                self._open_count = max(0, self._open_count - 1)
                if conn.broken:
                    stale, self._idle = self._idle, []
                    for old, _ in stale:
                        self._pollers.pop(id(old), None)
                    self._open_count = max(0, self._open_count - len(stale))
            self._cond.notify_all()
        if mine:
            for old in [conn] + [c for c, _ in stale]:
                with suppress(Exception):
                    old.close()
        return fired

    def give_back(self, conn: Connection) -> bool:
        """Return ``conn`` to the pool (or close it); True when the watchdog had cut it off."""
        with signals_deferred():  # as take: a half-done give-back leaks a place
            return self._give_back(conn)

    def _give_back(self, conn: Connection) -> bool:
        # A sync-wait warning belongs to the statement it came with, which the
        # caller has checked by now: the next borrower starts without it.
        UNCONFIRMED.discard(id(conn))
        # A pipeline an interrupt left open (results never collected) is not reusable.
        pgconn = conn.pgconn
        healthy = (pgconn.status == _CONN_OK
                   and pgconn.transaction_status == _TX_IDLE
                   and pgconn.pipeline_status == _PIPELINE_OFF)
        if not healthy:
            return self._discard(conn)
        fired = WATCHDOG.disarm_deferred(conn)
        with self._lock:
            if not fired and not self._closed and len(self._idle) < self._max_idle \
                    and id(conn) in self._pollers:
                self._idle.append((conn, time.monotonic()))
                if self._waiting:  # Condition.notify is Python: ~1,000 instructions
                    self._cond.notify()
                return False
        return self._discard(conn) or fired

    def rollback(self, conn: Connection) -> None:
        if conn.closed or conn.broken:
            return
        if conn.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF:
            with suppress(Exception):  # left mid-pipeline by an interrupt: state unknown
                conn.close()
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            with suppress(Exception):
                conn.close()

    def close(self) -> None:
        with signals_deferred(), self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            for conn, _ in idle:
                self._pollers.pop(id(conn), None)
            self._cond.notify_all()
        for conn, _ in idle:  # the idle ones are this process's own (see _forked)
            with suppress(Exception):
                conn.close()


_REGISTRY: dict[tuple[Settings, int], Connections] = {}
_REGISTRY_LOCK = threading.Lock()
_POOLS: weakref.WeakSet[Connections] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()  # as the pools' own locks (see Connections._forked)
    for pool in list(_POOLS):
        pool._forked()


os.register_at_fork(after_in_child=_after_fork_in_child)
