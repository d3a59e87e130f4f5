"""How the backend talks to the server: connections, the pool and retries.

Everything about *getting* a usable connection lives here, apart from the SQL
the store runs on it (:mod:`.transaction`) and the tables (:mod:`.schema`):
connection parameters and their defaults, a small pool of idle connections
shared by the threads of a process, what a forked child must never touch, and
which failures are safe to retry.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import suppress
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..errors import storage

Connection = psycopg.Connection[tuple[Any, ...]]

#: How long a writer waits for a busy agent before MEMORY_STORAGE_ERROR.
LOCK_TIMEOUT_MS: Final = 30_000
#: Attempts at beginning a transaction (stale connection, serialization, deadlock).
BEGIN_ATTEMPTS: Final = 5
#: Idle connections kept per backend; more are opened while threads need them.
MAX_IDLE: Final = 4
#: A pooled connection idle this long is checked before a ``peek()`` uses it.
PING_AFTER_S: Final = 5.0
#: Connection parameters we set unless the URL sets them itself.
CONNECT_DEFAULTS: Final = {
    "connect_timeout": "10",
    "application_name": "rotifer-memory",
}


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def retryable(exc: psycopg.Error, conn: Connection) -> bool:
    """Worth another attempt at *beginning* a transaction?"""
    return isinstance(exc, pg_errors.TransactionRollback) or conn.broken or conn.closed


def describe_url(url: str) -> str:
    """``host:port/dbname`` of a URL, for messages: never the password."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return "an invalid PostgreSQL URL"
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    port = str(params.get("port") or "5432")
    return f"{host}:{port}/{params.get('dbname') or params.get('user') or ''}"


class Connections:
    """Connections to one database: opened on demand, a few kept idle for reuse.

    Safe across threads (each borrower gets its own connection) and across
    ``fork()``: a child never uses or closes the connections it inherited.
    """

    def __init__(self, url: str, *, max_idle: int = MAX_IDLE,
                 lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
        #: Where the memory lives, for messages and the audit log (no password).
        self.location = describe_url(url)
        try:
            given = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise storage(f"invalid PostgreSQL memory URL: {first_line(exc)}") from exc
        self._conninfo = make_conninfo(
            url, **{k: v for k, v in CONNECT_DEFAULTS.items() if k not in given})
        self._max_idle = max_idle
        # A lock_timeout given in the URL (options=-c lock_timeout=...) wins.
        self._lock_timeout_ms = None if "lock_timeout" in str(given.get("options", "")) \
            else int(lock_timeout_ms)
        self._lock = threading.Lock()
        self._idle: list[tuple[Connection, float]] = []  # (connection, idle since)
        #: Idle seconds after which ``take(ping=True)`` checks a pooled connection first.
        self.ping_after_s = PING_AFTER_S
        self._inherited: list[Connection] = []  # kept alive, never closed (see take)
        self._pid = os.getpid()
        self._closed = False

    def _open(self) -> Connection:
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise storage(f"cannot connect to the memory database at {self.location}: "
                          f"{first_line(exc)}") from exc
        try:
            if self._lock_timeout_ms is not None:
                conn.execute(f"SET lock_timeout = {self._lock_timeout_ms}")
        except psycopg.Error as exc:
            conn.close()
            raise storage(f"the memory database at {self.location} is not usable: "
                          f"{first_line(exc)}") from exc
        return conn

    def take(self, *, ping: bool = False) -> Connection:
        """A connection from the pool, or a new one.

        With ``ping``, a connection that sat idle longer than ``ping_after_s`` is
        checked first (one round trip) and replaced if the server dropped it:
        ``peek()`` cannot retry its body, while ``read()``/``write()`` retry their
        ``BEGIN`` instead.
        """
        while True:
            with self._lock:
                if self._closed:
                    raise storage("the memory store is closed")
                if os.getpid() != self._pid:
                    # A forked child: the idle connections are the parent's sessions.
                    # Closing them would end those sessions, so just never use them.
                    self._inherited.extend(conn for conn, _ in self._idle)
                    self._idle = []
                    self._pid = os.getpid()
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if not ping or time.monotonic() - since < self.ping_after_s:
                return conn
            try:
                conn.execute("SELECT 1")
                return conn
            except psycopg.Error:
                with suppress(Exception):
                    conn.close()
        return self._open()

    def give_back(self, conn: Connection) -> None:
        healthy = (not conn.closed and not conn.broken
                   and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE)
        with self._lock:
            if healthy and not self._closed and os.getpid() == self._pid \
                    and len(self._idle) < self._max_idle:
                self._idle.append((conn, time.monotonic()))
                return
        if os.getpid() == self._pid:
            with suppress(Exception):
                conn.close()

    def rollback(self, conn: Connection) -> None:
        if conn.closed or conn.broken:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            with suppress(Exception):
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            mine = os.getpid() == self._pid
        if mine:
            for conn, _ in idle:
                with suppress(Exception):
                    conn.close()
