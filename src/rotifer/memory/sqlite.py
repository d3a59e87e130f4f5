"""The embedded backend: one SQLite file, ``.rotifer/playground.db``.

Why these settings:

* WAL journal, so readers never block the writer and the writer never blocks
  readers; ``synchronous=NORMAL`` is durable across process crashes, which is
  what WAL guarantees at that level (an OS crash may lose the last commits).
* Every write transaction starts with ``BEGIN IMMEDIATE``: it takes the write
  lock up front, through the busy handler, instead of failing half-way with
  "database is locked" when a read transaction tries to upgrade.
* A generous busy timeout plus a bounded retry, so several processes on one
  agent queue up instead of surfacing SQLITE_BUSY to genes.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext, suppress
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from .backend import (
    AGENT_COLUMNS,
    BRIEF_COLUMNS,
    LOOKUP_ROW_AT,
    ROW_COLUMNS,
    AgentRecord,
    Brief,
    Row,
    lookup_sql,
    new_row,
    prefix_upper_bound,
    put_sql,
)
from .errors import MemoryError, damaged, storage
from .model import AccessPolicy, Category, DataPolicy, RetentionPolicy, Scope, SharePolicy

STEP_1 = """
CREATE TABLE IF NOT EXISTS memory_agents (
    agent_id TEXT PRIMARY KEY,
    quota_bytes INTEGER NOT NULL,
    max_retention_days INTEGER,
    anonymization_supported INTEGER NOT NULL,
    used_bytes INTEGER NOT NULL,
    next_seq INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_entries (
    agent_id TEXT NOT NULL,
    key TEXT NOT NULL,
    category TEXT NOT NULL,
    value BLOB NOT NULL,
    size INTEGER NOT NULL,
    created_by TEXT NOT NULL,
    creator_domain TEXT,
    last_accessed_by TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL,
    read_scope TEXT NOT NULL,
    write_scope TEXT NOT NULL,
    share_policy TEXT NOT NULL,
    retention TEXT,
    expires_us INTEGER,
    seq INTEGER NOT NULL,
    UNIQUE (agent_id, key)
);
CREATE INDEX IF NOT EXISTS memory_entries_cleanup
    ON memory_entries (agent_id, category, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_recent
    ON memory_entries (agent_id, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_expiry
    ON memory_entries (agent_id, expires_us, seq) WHERE expires_us IS NOT NULL;
"""

PUT_SQL = put_sql("?")
LOOKUP_SQL = lookup_sql("?")
BATCH = 256
#: The first page of the cleanup and expiry scans (they double from there).
FIRST_PAGE = 16
DELETE_CHUNK = 500
BUSY_TIMEOUT_S = 30.0


def _step_1(conn: sqlite3.Connection) -> None:
    """The first schema.  ``IF NOT EXISTS``: files made before the version was
    recorded (``user_version`` 0) already have it."""
    for statement in STEP_1.split(";"):
        if statement.strip():
            conn.execute(statement)


def _step_2(conn: sqlite3.Connection) -> None:
    """``memory_agents.last_us``: the time of the agent's last change, so the next
    one is stamped after it whatever the clock does (see memory/changes.py).
    Existing agents start from their newest entry's update time."""
    conn.execute("ALTER TABLE memory_agents ADD COLUMN last_us INTEGER NOT NULL DEFAULT 0")
    conn.execute("UPDATE memory_agents SET last_us = coalesce((SELECT max(updated_us) FROM "
                 "memory_entries e WHERE e.agent_id = memory_agents.agent_id), 0)")


#: Step n takes a file from schema version n - 1 (``PRAGMA user_version``) to n.
#: Opening reads the version without a lock and runs DDL only when a step is
#: missing: the write lock it needs would queue behind every write in progress.
STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _step_1, 2: _step_2}
SCHEMA_VERSION = max(STEPS)


def retention_to_text(policy: RetentionPolicy | None) -> str | None:
    return None if policy is None else json.dumps(policy.to_json(), separators=(",", ":"))


def retention_from_text(text: str | None) -> RetentionPolicy | None:
    return None if text is None else _parse_retention(text)


@functools.lru_cache(maxsize=256)
def _parse_retention(text: str) -> RetentionPolicy:
    """Stored retention policies repeat; parse each text once (they are immutable)."""
    return RetentionPolicy.parse(json.loads(text))


def row_params(row: Row) -> tuple[Any, ...]:
    return (
        row.agent_id, row.key, row.category.value, row.value, row.size, row.created_by,
        row.creator_domain, row.last_accessed_by, row.created_us, row.updated_us,
        row.access.read_scope.value, row.access.write_scope.value, row.access.share_policy.value,
        retention_to_text(row.retention), row.expires_us, row.seq,
    )


# Rows are decoded defensively: a damaged or hand-edited file (an unknown
# category, a retention that is not JSON, a value stored as text) is
# MEMORY_STORAGE_ERROR, never a ValueError escaping into a gene.
_UNREADABLE = (ValueError, TypeError, KeyError, MemoryError)

# Decoding a row is the hot path of every query: plain dict lookups instead of
# calling the enums, and one shared AccessPolicy per combination of scopes.
_CATEGORIES: dict[object, Category] = {c.value: c for c in Category}
_POLICIES: dict[tuple[str, str, str], AccessPolicy] = {}


def _policy(read: str, write: str, share: str) -> AccessPolicy:
    key = (read, write, share)
    policy = _POLICIES.get(key)
    if policy is None:
        policy = AccessPolicy(Scope(read), Scope(write), SharePolicy(share))
        if len(_POLICIES) < 256:  # only valid combinations get here; there are 48
            _POLICIES[key] = policy
    return policy


def _blob(value: object) -> bytes:
    if type(value) is bytes:
        return value
    if not isinstance(value, bytes | memoryview):
        raise TypeError(f"the value is stored as {type(value).__name__}, not as a BLOB")
    return bytes(value)


def make_row(r: tuple[Any, ...]) -> Row:
    try:
        # Positional, in ROW_COLUMNS order: agent_id, key, category, value,
        # created_by, creator_domain, last_accessed_by, created_us, updated_us,
        # access, retention, expires_us, seq.
        return new_row(
            r[0], r[1], _CATEGORIES[r[2]], _blob(r[3]), r[4], r[5], r[6], r[7], r[8],
            _policy(r[9], r[10], r[11]), None if r[12] is None else _parse_retention(r[12]),
            r[13], r[14],
        )
    except _UNREADABLE as exc:
        raise damaged(f"an entry {r[1]!r}", exc) from None


def make_brief(r: tuple[Any, ...]) -> Brief:
    try:
        return Brief(key=r[0], category=_CATEGORIES[r[1]], size=r[2], updated_us=r[3], seq=r[4],
                     created_by=r[5])
    except _UNREADABLE as exc:
        raise damaged(f"an entry {r[0]!r}", exc) from None


def make_agent(r: tuple[Any, ...]) -> AgentRecord:
    return AgentRecord(r[0], r[1], _data_policy(r[2], bool(r[3])), r[4], r[5], r[6])


@functools.lru_cache(maxsize=256)
def _data_policy(max_retention_days: int | None, anonymization_supported: bool) -> DataPolicy:
    return DataPolicy(max_retention_days, anonymization_supported)


class SqliteTransaction:
    """:class:`~rotifer.memory.backend.Transaction` over one sqlite3 connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    def get_agent(self, agent_id: str) -> AgentRecord | None:
        r = self._one(f"SELECT {AGENT_COLUMNS} FROM memory_agents WHERE agent_id = ?",
                      (agent_id,))
        return None if r is None else make_agent(r)

    def list_agents(self) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT agent_id FROM memory_agents ORDER BY agent_id")]

    def insert_agent(self, record: AgentRecord) -> None:
        self.conn.execute(
            f"INSERT INTO memory_agents ({AGENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (record.agent_id, record.quota_bytes, record.data_policy.max_retention_days,
             int(record.data_policy.anonymization_supported), record.used_bytes, record.next_seq,
             record.last_us))

    def update_agent(self, agent_id: str, used_bytes: int, next_seq: int, last_us: int
                     ) -> None:
        cur = self.conn.execute(
            "UPDATE memory_agents SET used_bytes = ?, next_seq = ?, last_us = ? "
            "WHERE agent_id = ?", (used_bytes, next_seq, last_us, agent_id))
        if cur.rowcount != 1:
            raise storage(f"agent {agent_id!r} has no memory")

    def delete_agent(self, agent_id: str) -> None:
        self.conn.execute("DELETE FROM memory_entries WHERE agent_id = ?", (agent_id,))
        self.conn.execute("DELETE FROM memory_agents WHERE agent_id = ?", (agent_id,))

    def get(self, agent_id: str, key: str) -> Row | None:
        r = self._one(f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = ? AND key = ?",
                      (agent_id, key))
        return None if r is None else make_row(r)

    def lookup(self, agent_id: str, key: str | None, now_us: int
               ) -> tuple[AgentRecord, bool, Row | None] | None:
        r = self._one(LOOKUP_SQL, (now_us, key, agent_id))
        if r is None:
            return None
        at = LOOKUP_ROW_AT
        return make_agent(r[:at - 1]), bool(r[at - 1]), None if r[at] is None else make_row(r[at:])

    def put(self, row: Row) -> None:
        # An upsert, not INSERT OR REPLACE: replacing deletes the old row and
        # inserts a new one (every index entry twice, a 10 KiB value's overflow
        # pages freed and allocated again); updating in place is much cheaper.
        self.conn.execute(PUT_SQL, row_params(row))

    def touch(self, agent_id: str, key: str, gene_id: str) -> None:
        self.conn.execute(
            "UPDATE memory_entries SET last_accessed_by = ? WHERE agent_id = ? AND key = ?",
            (gene_id, agent_id, key))

    def delete(self, agent_id: str, keys: list[str]) -> None:
        # A statement per chunk of keys, not per key: an eviction of 100 entries
        # is one DELETE.
        for start in range(0, len(keys), DELETE_CHUNK):
            chunk = keys[start:start + DELETE_CHUNK]
            self.conn.execute(
                "DELETE FROM memory_entries WHERE agent_id = ? AND key IN "
                f"({', '.join('?' * len(chunk))})", (agent_id, *chunk))

    def _pages(self, sql: str, params: tuple[Any, ...], after_sql: str,
               make_after: Any, first: int = BATCH) -> Iterator[tuple[Any, ...]]:
        """Keyset pagination: each page is fetched whole, so the caller may
        write between pages without disturbing an open cursor.  Pages start
        at ``first`` rows and double up to :data:`BATCH`, so a caller that
        usually wants a few rows (cleanup: the oldest one or two) fetches few."""
        after: tuple[Any, ...] = ()
        size = first
        while True:
            extra = after_sql if after else ""
            rows = self.conn.execute(sql.format(after=extra, limit=size), params + after
                                     ).fetchall()
            yield from rows
            if len(rows) < size:
                return
            after = make_after(rows[-1])
            size = min(2 * size, BATCH)

    def iter_expired(self, agent_id: str, now_us: int) -> Iterator[Brief]:
        sql = (f"SELECT expires_us, {BRIEF_COLUMNS} FROM memory_entries WHERE agent_id = ? "
               "AND expires_us IS NOT NULL AND expires_us <= ? {after} "
               "ORDER BY expires_us, seq LIMIT {limit}")
        for r in self._pages(sql, (agent_id, now_us), "AND (expires_us, seq) > (?, ?)",
                             lambda r: (r[0], r[5]), FIRST_PAGE):
            yield make_brief(r[1:])

    def iter_oldest(self, agent_id: str, category: Category) -> Iterator[Brief]:
        sql = (f"SELECT {BRIEF_COLUMNS} FROM memory_entries WHERE agent_id = ? AND category = ? "
               "{after} ORDER BY updated_us, seq LIMIT {limit}")
        for r in self._pages(sql, (agent_id, category.value),
                             "AND (updated_us, seq) > (?, ?)", lambda r: (r[3], r[4]),
                             FIRST_PAGE):
            yield make_brief(r)

    def iter_newest(
        self,
        agent_id: str,
        *,
        category: Category | None = None,
        key_prefix: str | None = None,
        since_us: int | None = None,
        until_us: int | None = None,
    ) -> Iterator[Row]:
        where = ["agent_id = ?"]
        params: list[Any] = [agent_id]
        if category is not None:
            where.append("category = ?")
            params.append(category.value)
        if key_prefix:
            where.append("key >= ?")
            params.append(key_prefix)
            upper = prefix_upper_bound(key_prefix)
            if upper is not None:
                where.append("key < ?")
                params.append(upper)
        if since_us is not None:
            where.append("updated_us >= ?")
            params.append(since_us)
        if until_us is not None:
            where.append("updated_us < ?")
            params.append(until_us)
        sql = (f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE {' AND '.join(where)} {{after}} "
               "ORDER BY updated_us DESC, seq DESC LIMIT {limit}")
        for r in self._pages(sql, tuple(params), "AND (updated_us, seq) < (?, ?)",
                             lambda r: (r[8], r[14])):
            row = make_row(r)
            if key_prefix and not row.key.startswith(key_prefix):
                continue  # belt and braces: the range above is exact already
            yield row

    def count(self, agent_id: str) -> int:
        r = self._one("SELECT count(*) FROM memory_entries WHERE agent_id = ?", (agent_id,))
        return int(r[0]) if r else 0

    def log_lines(self, agent_id: str, seq: int, lines: list[str]) -> None:
        """SQLite keeps no copy: the one ``audit.jsonl`` beside it is the record."""

    def audit_lines(self, agent_id: str) -> list[dict[str, Any]] | None:
        return None

    def sum_sizes(self, agent_id: str) -> int:
        r = self._one("SELECT coalesce(sum(size), 0) FROM memory_entries WHERE agent_id = ?",
                      (agent_id,))
        return int(r[0]) if r else 0


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


class SqliteBackend:
    """SQLite behind the backend interface; safe across threads and processes."""

    name = "sqlite"
    keeps_audit = False

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
        self.busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        if not create and not path.is_file():
            raise storage(f"the memory database {path} does not exist")
        try:
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
            # An existing store is brought up to this version's schema even with
            # create=False: that upgrades the memory, it does not create or repair it.
            if self._version() < SCHEMA_VERSION:
                with self.write(None) as tx:
                    self._upgrade(tx.conn)
        except sqlite3.Error as exc:
            self.conn.close()
            raise storage(f"the memory database {path} is not usable: {exc}") from exc
        except MemoryError:
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
        row = self.conn.execute("PRAGMA user_version").fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise storage(f"the memory database {self.path} has schema version {version}; "
                          f"this rotifer knows {SCHEMA_VERSION}")
        return version

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        """Apply the missing steps, holding the write lock (read the version again
        under it: another process may have upgraded the file meanwhile)."""
        for step in range(self._version() + 1, SCHEMA_VERSION + 1):
            STEPS[step](conn)
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
