"""The SQLite backend: the connection, its settings, opening and upgrading the file,
and transactions that hold the write lock."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from contextlib import AbstractContextManager, nullcontext, suppress
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from ...errors import AgentMemoryError, storage
from ...private import create_private
from ..backend import Backend
from .rows import parse_retention
from .schema import SCHEMA_VERSION, STEPS, present_version
from .transaction import SqliteTransaction

BUSY_TIMEOUT_S = 30.0
_READ_SQL = SqliteTransaction.sql.read


#: SQLite's primary result codes that mean "another connection holds a lock":
#: BEGIN waits and tries again.  (The primary code is the low byte of an
#: extended one, e.g. SQLITE_BUSY_SNAPSHOT.)
_BUSY_CODES = frozenset((sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED))


def _is_busy(exc: sqlite3.Error) -> bool:
    code: int | None = getattr(exc, "sqlite_errorcode", None)  # None: not from SQLite
    return code is not None and code & 0xFF in _BUSY_CODES


class SqliteBackend(Backend):
    """SQLite behind the backend interface; safe across threads and processes."""

    name = "sqlite"

    def __init__(self, path: Path, *, busy_timeout_s: float = BUSY_TIMEOUT_S,
                 create: bool = True) -> None:
        """Open (and, with ``create``, create or complete) the database at ``path``.

        ``busy_timeout_s`` is how long a call waits for another process's
        write lock before it fails with MEMORY_STORAGE_ERROR; the default is
        long enough that genes never see a busy database under real load.

        ``create=False`` is for callers that only use memory that must exist
        already (listing, exporting, running an agent): a missing file, or
        one without the memory tables (an empty file, another database), is
        MEMORY_STORAGE_ERROR naming the file, and the file is not touched --
        creating it would hide that the memory is gone.
        """
        self.path = path
        self.location = str(path)
        self.busy_timeout_s = busy_timeout_s
        #: The schema version this open upgraded the file from (None: none needed).
        self.upgraded_from: int | None = None
        self._lock = threading.RLock()
        if not create and not path.is_file():
            raise storage(f"the memory database {path} does not exist")
        try:
            if create:  # made 0600 first: SQLite keeps its mode, and gives it -wal and -shm
                with contextlib.suppress(FileNotFoundError):  # no folder: connect says so
                    create_private(path)
            # mode=rw never creates the file, even if it vanishes after the check.
            target = f"file:{quote(str(path))}?mode=rw" if not create else str(path)
            self.conn = sqlite3.connect(
                target, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False,
                uri=not create,
            )
        except sqlite3.Error as exc:
            raise storage(f"cannot open the memory database {path}: {exc}") from exc
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            if not create:
                self._check_schema()
            mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise storage(f"the memory database {path} cannot use WAL mode (got {mode})")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            # Only a command that may create memory upgrades the schema: one that
            # only uses memory (create=False) never changes the file.
            version = self._version()
            if version < SCHEMA_VERSION and not create:
                raise storage(
                    f"the memory database {path} has schema version {version}, older than "
                    f"this rotifer's {SCHEMA_VERSION}: run `rotifer init` in its project to "
                    "upgrade it in place (commands that only use memory never change it)")
            if version < SCHEMA_VERSION:
                self.upgraded_from = version
                with self.write(None) as tx:
                    self._upgrade(tx.conn)
        except sqlite3.Error as exc:
            self.conn.close()
            raise storage(f"the memory database {path} is not usable: {exc}") from exc
        except AgentMemoryError:
            self.conn.close()
            raise

    def _check_schema(self) -> None:
        """MEMORY_STORAGE_ERROR unless the file holds the memory tables (read only)."""
        rows = self.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN "
            "('memory_agents', 'memory_entries')").fetchall()
        if len(rows) != 2:
            empty = self.path.exists() and self.path.stat().st_size == 0
            what = "is empty" if empty else "holds no rotifer memory"
            raise storage(f"the memory database {self.path} {what} (was it replaced or "
                          "damaged?)")

    def _abandoned(self) -> None:
        """Roll back a transaction an interrupt left open (Ctrl-C or a deadline's
        signal raised where no ``finally`` could run, e.g. on entering
        ``__exit__``): transactions never nest, so an open one here is dead, and
        reading through it would see changes that were never committed."""
        with suppress(sqlite3.Error):  # a closed connection fails at its next statement
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")

    def _version(self) -> int:
        """The recorded schema version; MEMORY_STORAGE_ERROR naming the file when it is
        newer than this rotifer's, or damaged (negative, or older than the tables)."""
        row = self.conn.execute("PRAGMA user_version").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise storage(f"the memory database {self.path} has schema version {version}; "
                          f"this rotifer knows {SCHEMA_VERSION}")
        present = present_version(self.conn)
        if version < 0 or (present > 1 and version < present):
            raise storage(f"the memory database {self.path} is damaged: it records schema "
                          f"version {version} (PRAGMA user_version) but "
                          + ("no version is negative" if version < 0 else
                             f"its tables are version {present}'s")
                          + "; restore it from a backup or an export")
        return version

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        """Apply the missing steps, holding the write lock (read the version again
        under it: another process may have upgraded the file meanwhile)."""
        for step in range(self._version() + 1, SCHEMA_VERSION + 1):
            STEPS[step].run(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _begin(self, statement: str) -> None:
        deadline = time.monotonic() + self.busy_timeout_s
        while True:
            try:
                self.conn.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)

    # The context managers are small classes rather than @contextmanager
    # generators: every memory call opens one, and a generator (two, nested,
    # for a transaction) costs several microseconds of a ~25 us read.

    def read(self) -> _Transaction:
        return _Transaction(self, "BEGIN DEFERRED")

    def write(self, agent_id: str | None) -> _Transaction:
        # SQLite has one writer per file, so "this agent exclusively" is the whole file.
        return _Transaction(self, "BEGIN IMMEDIATE")

    def peek(self) -> _Peek:
        """Single statements, each atomic on its own: the cheapest point read."""
        return _Peek(self)

    def peek_entry(self, agent_id: str, key: str, now_us: int) -> tuple[Any, ...] | None:
        """What ``with self.peek() as tx: tx.read_entry(...)`` does, in one frame:
        the lock, a transaction an interrupt left open rolled back, the statement,
        its error as MEMORY_STORAGE_ERROR.  A read's context manager (two calls
        and an object) and the transaction object cost ~1.5 µs of a ~20 µs read."""
        lock = self._lock
        lock.acquire()
        try:
            if self.conn.in_transaction:
                self._abandoned()
            row: tuple[Any, ...] | None = self.conn.execute(
                _READ_SQL, (now_us, key, agent_id)).fetchone()
            return row
        except sqlite3.Error as exc:
            raise storage(f"memory store failed: {exc}") from exc
        finally:
            lock.release()

    retention_of = staticmethod(parse_retention)

    def long_running(self) -> AbstractContextManager[None]:
        """Nothing to change: SQLite bounds only lock waits (the busy timeout)."""
        return nullcontext()

    def close(self) -> None:
        with self._lock:
            self.conn.close()


class _Transaction(AbstractContextManager[SqliteTransaction]):
    """One transaction under the backend's lock: begun on entry; committed on
    a normal exit, rolled back on an exception.  SQLite errors, in the block
    or from the commit, surface as MEMORY_STORAGE_ERROR."""

    __slots__ = ("backend", "begin")

    def __init__(self, backend: SqliteBackend, begin: str) -> None:
        self.backend = backend
        self.begin = begin

    def __enter__(self) -> SqliteTransaction:
        backend = self.backend
        backend._lock.acquire()
        try:
            backend._abandoned()
            backend._begin(self.begin)
        except sqlite3.Error as exc:
            backend._lock.release()
            raise storage(f"memory store failed: {exc}") from exc
        except BaseException:  # an interrupt, possibly just after BEGIN ran
            if backend.conn.in_transaction:
                with suppress(sqlite3.Error):
                    backend.conn.execute("ROLLBACK")
            backend._lock.release()
            raise
        return SqliteTransaction(backend.conn)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        backend = self.backend
        conn = backend.conn
        try:
            if exc is not None:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise storage(f"memory store failed: {exc}") from exc
                return  # the block's exception propagates
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as commit_exc:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise storage(f"memory store failed to commit: {commit_exc}") from commit_exc
        finally:
            # An interrupt (Ctrl-C, a deadline's signal) raised here before COMMIT
            # ran leaves the transaction open: end it, so the connection is clean
            # for the next call and for asking whether the change committed.
            if conn.in_transaction:
                with suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            backend._lock.release()


class _Peek(AbstractContextManager[SqliteTransaction]):
    """Statements outside any transaction, under the backend's lock."""

    __slots__ = ("backend",)

    def __init__(self, backend: SqliteBackend) -> None:
        self.backend = backend

    def __enter__(self) -> SqliteTransaction:
        self.backend._lock.acquire()
        try:
            self.backend._abandoned()
        except BaseException:
            self.backend._lock.release()
            raise
        return SqliteTransaction(self.backend.conn)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.backend._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise storage(f"memory store failed: {exc}") from exc
