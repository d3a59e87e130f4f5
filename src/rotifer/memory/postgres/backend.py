"""The backend interface over PostgreSQL: transactions, agent locks, set-up.

The reasoning behind the isolation levels and locks is in the package
docstring (:mod:`rotifer.memory.postgres`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from ..errors import storage
from . import schema
from .connection import (
    BEGIN_ATTEMPTS,
    LOCK_TIMEOUT_MS,
    MAX_IDLE,
    Connection,
    Connections,
    first_line,
    retryable,
)
from .transaction import LOCK_AGENT_SQL, PostgresTransaction, storable


class PostgresBackend:
    """PostgreSQL behind the backend interface; safe across threads and processes."""

    name = "postgresql"

    def __init__(self, url: str, *, max_idle: int = MAX_IDLE,
                 lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
        self.url = url
        self.connections = Connections(url, max_idle=max_idle, lock_timeout_ms=lock_timeout_ms)
        #: Where the memory lives, for messages and the audit log (no password).
        self.location = self.connections.location
        self.schema = ""
        self._setup()

    @property
    def ping_after_s(self) -> float:
        """Idle seconds after which ``peek()`` checks a pooled connection first."""
        return self.connections.ping_after_s

    @ping_after_s.setter
    def ping_after_s(self, seconds: float) -> None:
        self.connections.ping_after_s = seconds

    # -- set-up ---------------------------------------------------------------

    def _setup(self) -> None:
        """Check the schema with one SELECT; upgrade it only when a step is missing."""
        conn = self.connections.take()
        try:
            found = schema.check(conn, self.location)
            if found is not None and found[1] == schema.SCHEMA_VERSION:
                self.schema = found[0]
            else:
                name = found[0] if found else schema.environment(conn, self.location)
                conn.execute("BEGIN")
                schema.upgrade(conn, name, self.location)
                conn.execute("COMMIT")
                self.schema = name
        except psycopg.Error as exc:
            self.connections.rollback(conn)
            self.connections.give_back(conn)
            self.close()
            raise storage(f"the memory database at {self.location} is not usable: "
                          f"{first_line(exc)}") from exc
        except BaseException:
            self.connections.rollback(conn)
            self.connections.give_back(conn)
            self.close()
            raise
        self.connections.give_back(conn)

    def _lock_key(self, agent_id: str) -> int:
        """A signed 64-bit advisory lock key for (schema, agent id)."""
        return schema.advisory_key(self.schema, agent_id)

    def _lock_agent(self, conn: Connection, agent_id: str) -> None:
        if not storable(agent_id):
            return  # no such agent can exist; the store will find none
        if conn.execute(LOCK_AGENT_SQL, (agent_id,)).fetchone() is not None:
            return
        # No row to lock yet: queue with everyone else who found none, then look again.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key(agent_id),))
        conn.execute(LOCK_AGENT_SQL, (agent_id,)).fetchone()

    def _begin(self, statement: str, agent_id: str | None) -> Connection:
        """Begin a transaction (and lock the agent), retrying what is safe to retry."""
        for attempt in range(BEGIN_ATTEMPTS):
            conn = self.connections.take()
            try:
                conn.execute(statement)
                if agent_id is not None:
                    self._lock_agent(conn, agent_id)
                return conn
            except psycopg.Error as exc:
                again = retryable(exc, conn) and attempt + 1 < BEGIN_ATTEMPTS
                self.connections.rollback(conn)
                self.connections.give_back(conn)
                if not again:
                    raise storage(f"memory store failed: {first_line(exc)}") from exc
                time.sleep(random.uniform(0.001, 0.01) * (2 ** attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _transaction(self, statement: str, agent_id: str | None
                     ) -> Iterator[PostgresTransaction]:
        conn = self._begin(statement, agent_id)
        try:
            yield PostgresTransaction(conn)
        except BaseException as exc:
            self.connections.rollback(conn)
            self.connections.give_back(conn)
            if isinstance(exc, psycopg.Error | UnicodeEncodeError):
                raise storage(f"memory store failed: {first_line(exc)}") from exc
            raise
        try:
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            self.connections.rollback(conn)
            self.connections.give_back(conn)
            raise storage(f"memory store failed to commit: {first_line(exc)}") from exc
        self.connections.give_back(conn)

    # -- the Backend interface ------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[PostgresTransaction]:
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", None) as tx:
            yield tx

    @contextmanager
    def write(self, agent_id: str | None) -> Iterator[PostgresTransaction]:
        with self._transaction("BEGIN ISOLATION LEVEL READ COMMITTED", agent_id) as tx:
            yield tx

    @contextmanager
    def peek(self) -> Iterator[PostgresTransaction]:
        """Autocommit statements, each atomic on its own: the cheapest point read."""
        conn = self.connections.take(ping=True)
        try:
            yield PostgresTransaction(conn)
        except (psycopg.Error, UnicodeEncodeError) as exc:
            self.connections.give_back(conn)
            raise storage(f"memory store failed: {first_line(exc)}") from exc
        except BaseException:
            self.connections.give_back(conn)
            raise
        self.connections.give_back(conn)

    def close(self) -> None:
        self.connections.close()
