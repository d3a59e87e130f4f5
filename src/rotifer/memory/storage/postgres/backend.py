"""The backend interface over PostgreSQL: transactions, agent locks, set-up.

The reasoning behind the isolation levels and locks is in the package
docstring (:mod:`rotifer.memory.storage.postgres`).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from ...errors import AgentMemoryError, storage
from ...model import RetentionPolicy
from ..backend import Backend
from . import schema
from .connection import BEGIN_ATTEMPTS, MAX_IDLE, Connection, Connections
from .health import retryable, unconfirmed
from .pipeline import Result, Statement, pipelined
from .rows import storable
from .settings import LOCK_TIMEOUT_MS, first_line
from .transaction import LOCK_AGENT_SQL, PostgresTransaction
from .watchdog import WATCHDOG

#: How far a hot standby is behind, the usual way: 0 when it has replayed all the
#: WAL it received, else the age of the last transaction it replayed.
REPLAY_DELAY_SQL = ("SELECT CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() "
                    "THEN 0 ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) "
                    "END")


#: How a change begins when it must say so (see ``PostgresBackend._open_on``).
WRITE_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"


class PostgresBackend(Backend):
    """PostgreSQL behind the backend interface; safe across threads and processes.

    Backends of one process on one URL share one capped pool of connections
    (:meth:`Connections.acquire`); each call carries one deadline,
    ``rotifer_timeout`` from now, for everything it does.
    """

    #: No lean paths: a lean path's hand-over repeats round trips here (see
    #: :attr:`Backend.lean_paths`).
    lean_paths = False

    name = "postgresql"

    def __init__(self, url: str, *, max_idle: int = MAX_IDLE,
                 lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
        self.url = url
        self.connections = Connections.acquire(url, max_idle=max_idle,
                                               lock_timeout_ms=lock_timeout_ms)
        self.settings = self.connections.settings
        #: Where the memory lives, for messages and the audit log (no password).
        self.location = self.connections.location
        self.schema = ""
        self._closed = False
        self._long = threading.local()  # .on: see long_running()
        # In transaction pooling every setting is local to the transaction, sent
        # with the BEGIN as one statement.
        self._local: list[Statement] = [] if self.settings.session_state else [
            (self.settings.local_settings_sql(), None)]
        # A point read outside a transaction cannot carry SET LOCAL search_path.
        self._peek_in_transaction = not self.settings.session_state \
            and self.settings.schema is not None
        self._setup()

    @property
    def ping_after_s(self) -> float:
        """Idle seconds after which ``peek()`` checks a pooled connection first."""
        return self.connections.ping_after_s

    @ping_after_s.setter
    def ping_after_s(self, seconds: float) -> None:
        self.connections.ping_after_s = seconds

    def _deadline(self) -> float:
        if self._closed:
            raise storage("the memory store is closed")
        return time.monotonic() + self.settings.timeout_s

    def _failed(self, conn: Connection, exc: BaseException, what: str) -> AgentMemoryError:
        """Return ``conn`` after a failure and make the error the caller sees."""
        self.connections.rollback(conn)
        if self.connections.give_back(conn):
            return self.connections.timed_out()
        if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
            return storage(f"the memory database at {self.location} is a read-only standby: "
                           "changes need the primary (a URL with "
                           "target_session_attrs=read-write)")
        return storage(f"{what}: {first_line(exc)}")

    def replay_delay(self) -> float | None:
        """On a hot standby: seconds since the last change it replayed was made on
        the primary (0 when it has replayed all it received and the primary has
        been idle since); None on a primary.  What a page reading a standby shows."""
        if not self.read_only:
            return None
        conn = self.connections.take(self._deadline(), ping=True)
        try:
            row = conn.execute(REPLAY_DELAY_SQL).fetchone()
        except psycopg.Error as exc:
            raise self._failed(conn, exc, "memory store failed") from exc
        self.connections.give_back(conn)
        return None if row is None or row[0] is None else max(0.0, float(row[0]))

    # -- set-up ---------------------------------------------------------------

    def _setup(self) -> None:
        """Check the schema with one SELECT; upgrade it only when a step is missing."""
        try:
            conn = self.connections.take(self._deadline())
        except BaseException:
            self.close()
            raise
        found = None
        try:
            if self._local:
                pipelined(conn, [("BEGIN", None), *self._local])
            found = schema.check(conn, self.location)
            if found is not None and (found[1] == schema.SCHEMA_VERSION or found[2]):
                if found[1] != schema.SCHEMA_VERSION:
                    raise storage(
                        f"the memory database at {self.location} is a read-only standby "
                        f"with schema version {found[1]}; open its primary once to upgrade "
                        f"it to {schema.SCHEMA_VERSION}")
                self.schema = found[0]
                self.read_only = found[2]
                if self._local:
                    conn.execute("COMMIT")
            else:
                if self._local:
                    conn.execute("ROLLBACK")
                pipelined(conn, [("BEGIN", None), *self._local])
                name = found[0] if found else schema.environment(conn, self.location)
                schema.upgrade(conn, name, self.location)
                conn.execute("COMMIT")
                self.schema = name
        except psycopg.Error as exc:
            self.close()
            failed = self._failed(conn, exc, f"the memory database at {self.location} "
                                             "is not usable")
            if found is None and isinstance(exc, pg_errors.ReadOnlySqlTransaction):
                # A standby that has not replayed the schema the primary's first
                # open made (or no open of the primary made it yet).
                raise storage(
                    f"the memory database at {self.location} is a read-only standby that "
                    "has not replayed rotifer's schema yet: wait until it has caught up "
                    "with its primary and try again (the primary makes the schema when "
                    "it is first opened), or open the primary (a URL with "
                    "target_session_attrs=read-write)") from exc
            raise failed from exc
        except BaseException:
            self.connections.rollback(conn)
            self.connections.give_back(conn)
            self.close()
            raise
        self.connections.give_back(conn)

    def _lock_key(self, agent_id: str) -> int:
        """A signed 64-bit advisory lock key for (schema, agent id)."""
        return schema.advisory_key(self.schema, agent_id)

    def _open_on(self, conn: Connection, statement: str, agent_id: str | None,
                 first: Statement | None, implicit: bool = False
                 ) -> tuple[str | None, Result | None]:
        """BEGIN, this deployment's ``SET LOCAL``s, the agent's row lock and
        ``first``, in one pipeline: one round trip.  ``first`` runs after the
        lock was granted, in a snapshot of its own (READ COMMITTED), so it sees
        everything the agent's previous holder committed.

        ``implicit``: no ``BEGIN`` -- the round trip ends with a ``Flush``
        instead of a ``Sync``, so the lock and ``first`` open the extended
        protocol's implicit transaction, which the ``Sync`` of the commit
        ends (see :mod:`.pipeline`).  At the session's
        ``default_transaction_isolation``, which every connection sets to READ
        COMMITTED when it opens (:meth:`.settings.Settings.settings_statements`)."""
        lock = agent_id is not None and storable(agent_id)
        statements: list[Statement] = [] if implicit else [(statement, None), *self._local]
        if lock:
            statements.append((LOCK_AGENT_SQL, (agent_id,)))
        if first is not None:
            statements.append(first)
        sync = not implicit
        cursors = pipelined(conn, statements, sync=sync)
        cur = cursors[-1] if first is not None else None
        if not lock:
            return None, cur
        assert agent_id is not None
        if cursors[len(statements) - 1 - (first is not None)].fetchone() is not None:
            return agent_id, cur
        # No row to lock yet: queue with everyone else who found none, then look
        # again (and run ``first`` again) -- one more round trip.
        again = pipelined(conn, [
            ("SELECT pg_advisory_xact_lock(%s)", (self._lock_key(agent_id),)),
            (LOCK_AGENT_SQL, (agent_id,)), *([first] if first is not None else [])], sync=sync)
        found = again[1].fetchone() is not None
        return (agent_id if found else None), (again[2] if first is not None else None)

    def _begin(self, statement: str, agent_id: str | None, deadline: float | None = None,
               first: Statement | None = None, implicit: bool = False
               ) -> tuple[Connection, str | None, Result | None]:
        """Begin a transaction, lock the agent and run ``first``, retrying what is
        safe to retry (nothing has been written yet)."""
        if deadline is None:
            deadline = self._deadline()
        for attempt in range(BEGIN_ATTEMPTS):
            conn = self.connections.take(deadline)
            try:
                return (conn, *self._open_on(conn, statement, agent_id, first, implicit))
            except psycopg.Error as exc:
                again = retryable(exc, conn) and attempt + 1 < BEGIN_ATTEMPTS
                error = self._failed(conn, exc, "memory store failed")
                pause = random.uniform(0.001, 0.01) * (2 ** attempt)
                if not again or time.monotonic() + pause >= deadline:
                    raise error from exc
                time.sleep(pause)
            except BaseException:
                # An interrupt after BEGIN (perhaps holding the agent's row lock):
                # close the connection, or its open transaction keeps the lock
                # until it is garbage-collected and every writer of the agent waits.
                with suppress(Exception):
                    conn.close()
                self.connections.discard(conn)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def long_running(self) -> Iterator[None]:
        """Transactions this thread begins in the block are bounded per statement."""
        before = getattr(self._long, "on", False)
        self._long.on = True
        try:
            yield
        finally:
            self._long.on = before

    def _watch(self, conn: Connection
               ) -> tuple[Callable[[], None], Callable[[], None]] | None:
        """Per-statement watching for a long-running transaction (None: the
        transaction is bounded as a whole, from the call's start)."""
        if not getattr(self._long, "on", False):
            return None
        bound = self.settings.timeout_s
        WATCHDOG.suspend(conn)  # the client may take its time between statements
        return (lambda: WATCHDOG.arm(conn, time.monotonic() + bound),
                lambda: WATCHDOG.suspend(conn))

    # -- the Backend interface ------------------------------------------------

    def read(self) -> _Transaction:
        return _Transaction(self, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", None)

    def write(self, agent_id: str | None) -> _Transaction:
        # A change needs no BEGIN (see _open_on), unless a pooler's SET LOCALs
        # need a transaction block (they are no-ops outside one).
        return _Transaction(self, WRITE_BEGIN, agent_id, implicit=not self._local)

    @staticmethod
    def retention_of(stored: Any) -> RetentionPolicy:
        return RetentionPolicy.parse(stored)  # jsonb arrives parsed

    def peek_entry(self, agent_id: str, key: str, now_us: int) -> tuple[Any, ...] | None:
        with self.peek() as tx:
            return tx.read_entry(agent_id, key, now_us)

    def peek(self) -> _Peek | _Transaction:
        """Autocommit statements, each atomic on its own: the cheapest point read.

        (Through a transaction-mode pooler with ``rotifer_schema``, a short
        transaction instead: the search path can only be set inside one.  Not
        READ ONLY: a reader's ``touch_if`` writes.  One statement is one
        snapshot at READ COMMITTED too.)"""
        if self._peek_in_transaction:
            return _Transaction(self, "BEGIN ISOLATION LEVEL READ COMMITTED", None)
        return _Peek(self)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.connections.release()


# The context managers of read(), write() and peek() as classes: a generator
# under @contextmanager costs a write ~2,500 instructions more per layer
# (contextlib's __enter__/__exit__, next() and throw() into the generator), and
# write() was two layers.  The same steps, in the same order.

class _Transaction:
    """``with backend.write(agent_id) as tx`` (and ``read()``): a transaction that
    begins with its first statement (see :mod:`.transaction`), or at once and
    statement by statement inside :meth:`PostgresBackend.long_running`;
    ``implicit``: begun without ``BEGIN`` (see ``PostgresBackend._open_on``)."""

    __slots__ = ("_agent_id", "_backend", "_implicit", "_statement", "_tx", "_watch")

    def __init__(self, backend: PostgresBackend, statement: str, agent_id: str | None, *,
                 implicit: bool = False) -> None:
        self._backend = backend
        self._statement = statement
        self._agent_id = agent_id
        self._implicit = implicit

    def __enter__(self) -> PostgresTransaction:
        backend, statement, agent_id = self._backend, self._statement, self._agent_id
        # The thread's own dict of the threading.local: getattr(local, "on",
        # False) raises and swallows an AttributeError in every thread that never
        # entered long_running() (~4,000 instructions more per call).
        if backend._long.__dict__.get("on", False):
            conn = backend._begin(statement, agent_id)[0]
            tx = PostgresTransaction(conn, backend._watch(conn))
        else:
            deadline = backend._deadline()
            implicit = self._implicit
            tx = PostgresTransaction(None, opener=lambda first: backend._begin(
                statement, agent_id, deadline, first, implicit), implicit=implicit)
        self._tx = tx
        self._watch = tx.watch
        return tx

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        backend, tx, watch = self._backend, self._tx, self._watch
        connections = backend.connections
        if exc is not None:
            tx.discard_queued()
            if tx.conn is None:
                return  # never begun: nothing to end
            conn = tx.conn
            if watch is not None:
                watch[0]()  # the rollback is bounded too
            if isinstance(exc, psycopg.Error | UnicodeEncodeError):
                raise backend._failed(conn, exc, "memory store failed") from exc
            if tx.implicit:
                tx.rollback()
            else:
                connections.rollback(conn)
            if connections.give_back(conn) and isinstance(exc, AgentMemoryError):
                raise connections.timed_out() from exc
            return
        if tx.conn is None:
            return  # nothing was asked: nothing began
        conn = tx.conn
        if watch is not None:
            watch[0]()
        try:
            tx.commit()  # with the writes still queued: one round trip
        except psycopg.Error as error:
            raise backend._failed(conn, error, "memory store failed to commit") from error
        except BaseException:
            # An interrupt (Ctrl-C, SIGTERM, a gene's deadline) in the middle of
            # COMMIT: the connection's state is unknown, so it is closed, never
            # reused (and its slot freed).  Whether the change committed is asked
            # of the store by the caller (memory/engine/changes.py: settle).
            with suppress(Exception):
                conn.close()
            connections.discard(conn)
            raise
        if unconfirmed(conn):
            # Committed on this server alone: not acknowledged (a failover would
            # lose it).  The caller's settle() asks, under the agent's lock,
            # whether the change is there, so the audit log tells which.
            connections.discard(conn)
            raise storage(f"the memory database at {backend.location} committed the change "
                          "but its synchronous standby did not confirm it; it may be lost "
                          "in a failover")
        if connections.give_back(conn):  # pragma: no cover - cut off after COMMIT returned
            raise connections.timed_out()


class _Peek:
    """``with backend.peek() as tx`` on a connection in autocommit."""

    __slots__ = ("_backend", "_conn")

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend

    def __enter__(self) -> PostgresTransaction:
        backend = self._backend
        conn = self._conn = backend.connections.take(backend._deadline(), ping=True)
        return PostgresTransaction(conn)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: object) -> None:
        backend, conn = self._backend, self._conn
        if isinstance(exc, psycopg.Error | UnicodeEncodeError):
            raise backend._failed(conn, exc, "memory store failed") from exc
        if exc is not None:
            backend.connections.give_back(conn)
            return
        if backend.connections.give_back(conn):  # pragma: no cover - cut off after the read
            raise backend.connections.timed_out()
