"""The scale-out backend: PostgreSQL through psycopg 3.

Chosen with ``ROTIFER_MEMORY_URL=postgresql://...``.  It implements the same
:mod:`~rotifer.memory.backend` interface as SQLite, so every rule of the
Memory API (scopes, data policy, quota, cleanup order, retention, audit) is the
store's code, unchanged; this module only stores rows and hands them back in
the orders the rules need.

How concurrency is handled, and why
-----------------------------------

Many worker processes, each with its own connections, may write to one agent.
The store keeps a running byte total per agent and checks the quota against
it, so two writers on one agent must never overlap.  We use **row locks at
READ COMMITTED**, not SERIALIZABLE with retries:

* ``write(agent_id)`` begins a READ COMMITTED transaction and takes the agent's
  row with ``SELECT ... FOR UPDATE``.  A second writer on the same agent waits
  on that lock; once it has it, each of its statements takes a fresh snapshot
  and sees everything the first one committed.  Writers on different agents
  never wait for each other.
* A row lock cannot lock a row that does not exist yet (``create_agent``, or
  importing an agent).  When the agent row is missing, the transaction takes a
  transaction-scoped advisory lock keyed by (schema, agent id) and looks for
  the row again.  Everyone who finds no row queues on that advisory lock, so
  two creators of one agent are serialized and the second one sees the first
  one's row (and then holds its row lock too).
* Why not SERIALIZABLE: the store's transaction body appends its audit lines
  *before* the commit (write-ahead), so a transaction that fails at commit with
  a serialization error could only be retried by running the rules again and
  writing a second set of audit lines.  With one row lock per transaction and
  the lock taken first, there is nothing to serialize and no lock cycle: a
  transaction locks exactly one agent, and readers take no locks at all (MVCC).
  Deadlocks are impossible by construction, so retrying is reserved for the
  moment before the body runs (see below).
* ``read()`` is REPEATABLE READ, READ ONLY: one snapshot across all the pages
  of a keyset-paginated query, with no locks.

Retries: serialization/deadlock failures and a connection found dead are
retried a bounded number of times, but only while beginning a transaction and
taking the lock -- before the caller's body has run, so a retry never repeats
an audit line.  A failure later in the transaction rolls back and surfaces as
MEMORY_STORAGE_ERROR.  ``lock_timeout`` bounds the wait for a busy agent (like
SQLite's busy timeout).

Threads and processes: each transaction borrows a connection from a small
pool and gives it back at the end, so a store shared by threads runs their
transactions on separate connections, in parallel.  Connections inherited
across ``fork()`` are never used or closed by the child (closing one would end
the parent's session); the child opens its own.

Ordering: keys are ``text COLLATE "C"`` in a UTF-8 database, so they compare
byte for byte, which is code point order -- the same order as SQLite's
BINARY collation.  Prefix queries use the range ``[prefix,
prefix_upper_bound(prefix))``, never ``LIKE``.  Values are ``bytea``; times
and counters are ``bigint`` microseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Final

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.types.json import Jsonb

from .backend import (
    AGENT_COLUMNS,
    BRIEF_COLUMNS,
    LOOKUP_ROW_AT,
    ROW_COLUMNS,
    AgentRecord,
    Brief,
    Row,
    lookup_sql,
    prefix_upper_bound,
    put_sql,
)
from .errors import MemoryError, damaged, storage
from .model import AccessPolicy, Category, DataPolicy, RetentionPolicy, Scope, SharePolicy

Connection = psycopg.Connection[tuple[Any, ...]]

SCHEMA_VERSION: Final = 2
BATCH: Final = 256
#: The first page of the cleanup and expiry scans (they double from there).
FIRST_PAGE: Final = 16
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

_CATEGORIES = ", ".join(f"'{c.value}'" for c in Category)
_SCOPES = ", ".join(f"'{s.value}'" for s in Scope)
_SHARES = ", ".join(f"'{s.value}'" for s in SharePolicy)

SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS memory_meta (
    name text PRIMARY KEY,
    value text NOT NULL
);
CREATE TABLE IF NOT EXISTS memory_agents (
    agent_id text COLLATE "C" PRIMARY KEY,
    quota_bytes bigint NOT NULL CHECK (quota_bytes > 0),
    max_retention_days integer,
    anonymization_supported boolean NOT NULL,
    used_bytes bigint NOT NULL CHECK (used_bytes >= 0),
    next_seq bigint NOT NULL,
    last_us bigint NOT NULL DEFAULT 0,
    -- The store checks the quota, and this keeps a bug from committing past it.
    CHECK (used_bytes <= quota_bytes)
);
CREATE TABLE IF NOT EXISTS memory_entries (
    agent_id text COLLATE "C" NOT NULL REFERENCES memory_agents (agent_id),
    key text COLLATE "C" NOT NULL,
    category text NOT NULL CHECK (category IN ({_CATEGORIES})),
    value bytea NOT NULL,
    size bigint NOT NULL,
    created_by text NOT NULL,
    creator_domain text,
    last_accessed_by text NOT NULL,
    created_us bigint NOT NULL,
    updated_us bigint NOT NULL,
    read_scope text NOT NULL CHECK (read_scope IN ({_SCOPES})),
    write_scope text NOT NULL CHECK (write_scope IN ({_SCOPES})),
    share_policy text NOT NULL CHECK (share_policy IN ({_SHARES})),
    retention jsonb,
    expires_us bigint,
    seq bigint NOT NULL,
    PRIMARY KEY (agent_id, key)
);
CREATE INDEX IF NOT EXISTS memory_entries_cleanup
    ON memory_entries (agent_id, category, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_recent
    ON memory_entries (agent_id, updated_us, seq);
CREATE INDEX IF NOT EXISTS memory_entries_expiry
    ON memory_entries (agent_id, expires_us, seq) WHERE expires_us IS NOT NULL;
CREATE TABLE IF NOT EXISTS memory_audit (
    id bigserial PRIMARY KEY,
    agent_id text COLLATE "C" NOT NULL,
    seq bigint NOT NULL,
    line text NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_audit_agent ON memory_audit (agent_id, id);
"""

#: Upgrades in place from the version before each (one transaction, under the
#: schema lock).  2: ``memory_agents.last_us`` and the ``memory_audit`` table
#: (issue 15); the table itself is created by :data:`SCHEMA`.
MIGRATIONS: Final = {
    2: (
        "ALTER TABLE memory_agents ADD COLUMN IF NOT EXISTS last_us bigint NOT NULL DEFAULT 0",
        "UPDATE memory_agents a SET last_us = coalesce((SELECT max(updated_us) FROM "
        "memory_entries e WHERE e.agent_id = a.agent_id), 0)",
    ),
}

PUT_SQL: Final = put_sql("%s")
LOOKUP_SQL: Final = lookup_sql("%s")
LOCK_AGENT_SQL: Final = "SELECT 1 FROM memory_agents WHERE agent_id = %s FOR UPDATE"


def _storable(text: str) -> bool:
    """Can ``text`` be stored in a PostgreSQL text column at all?

    Keys and agent ids never contain NUL or lone surrogates (the store refuses
    them), so a lookup with one simply finds nothing -- as it does on SQLite --
    instead of failing to encode.
    """
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _retention_param(policy: RetentionPolicy | None) -> Jsonb | None:
    return None if policy is None else Jsonb(policy.to_json())


def row_params(row: Row) -> tuple[Any, ...]:
    return (
        row.agent_id, row.key, row.category.value, row.value, row.size, row.created_by,
        row.creator_domain, row.last_accessed_by, row.created_us, row.updated_us,
        row.access.read_scope.value, row.access.write_scope.value, row.access.share_policy.value,
        _retention_param(row.retention), row.expires_us, row.seq,
    )


def make_row(r: tuple[Any, ...]) -> Row:
    try:
        return Row(
            agent_id=r[0], key=r[1], category=Category(r[2]), value=bytes(r[3]),
            created_by=r[4], creator_domain=r[5], last_accessed_by=r[6], created_us=r[7],
            updated_us=r[8], access=AccessPolicy(Scope(r[9]), Scope(r[10]), SharePolicy(r[11])),
            retention=None if r[12] is None else RetentionPolicy.parse(r[12]),
            expires_us=r[13], seq=r[14],
        )
    except (ValueError, TypeError, MemoryError) as exc:  # e.g. a retention edited by hand
        raise damaged(f"an entry {r[1]!r}", exc) from None


def make_brief(r: tuple[Any, ...]) -> Brief:
    return Brief(key=r[0], category=Category(r[1]), size=r[2], updated_us=r[3], seq=r[4],
                 created_by=r[5])


def make_agent(r: tuple[Any, ...]) -> AgentRecord:
    return AgentRecord(r[0], r[1], DataPolicy(r[2], bool(r[3])), r[4], r[5], r[6])


class PostgresTransaction:
    """:class:`~rotifer.memory.backend.Transaction` over one psycopg connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params, binary=True).fetchall()

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        return self.conn.execute(sql, params, binary=True).fetchone()

    def _run(self, sql: str, params: tuple[Any, ...]) -> int:
        return self.conn.execute(sql, params).rowcount

    # -- agents ---------------------------------------------------------------

    def get_agent(self, agent_id: str) -> AgentRecord | None:
        if not _storable(agent_id):
            return None
        r = self._one(f"SELECT {AGENT_COLUMNS} FROM memory_agents WHERE agent_id = %s",
                      (agent_id,))
        return None if r is None else make_agent(r)

    def list_agents(self) -> list[str]:
        return [r[0] for r in self._all("SELECT agent_id FROM memory_agents ORDER BY agent_id",
                                        ())]

    def insert_agent(self, record: AgentRecord) -> None:
        self._run(
            f"INSERT INTO memory_agents ({AGENT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (record.agent_id, record.quota_bytes, record.data_policy.max_retention_days,
             record.data_policy.anonymization_supported, record.used_bytes, record.next_seq,
             record.last_us))

    def update_agent(self, agent_id: str, used_bytes: int, next_seq: int, last_us: int
                     ) -> None:
        n = self._run("UPDATE memory_agents SET used_bytes = %s, next_seq = %s, last_us = %s "
                      "WHERE agent_id = %s", (used_bytes, next_seq, last_us, agent_id))
        if n != 1:
            raise storage(f"agent {agent_id!r} has no memory")

    def delete_agent(self, agent_id: str) -> None:
        self._run("DELETE FROM memory_entries WHERE agent_id = %s", (agent_id,))
        self._run("DELETE FROM memory_agents WHERE agent_id = %s", (agent_id,))

    # -- entries --------------------------------------------------------------

    def get(self, agent_id: str, key: str) -> Row | None:
        if not (_storable(agent_id) and _storable(key)):
            return None
        r = self._one(f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = %s AND key = %s",
                      (agent_id, key))
        return None if r is None else make_row(r)

    def lookup(self, agent_id: str, key: str | None, now_us: int
               ) -> tuple[AgentRecord, bool, Row | None] | None:
        if not _storable(agent_id):
            return None
        if key is not None and not _storable(key):
            key = None  # no stored key contains NUL or a lone surrogate
        r = self._one(LOOKUP_SQL, (now_us, key, agent_id))
        if r is None:
            return None
        at = LOOKUP_ROW_AT
        return make_agent(r[:at - 1]), bool(r[at - 1]), None if r[at] is None else make_row(r[at:])

    def put(self, row: Row) -> None:
        self._run(PUT_SQL, row_params(row))

    def touch(self, agent_id: str, key: str, gene_id: str) -> None:
        self._run("UPDATE memory_entries SET last_accessed_by = %s WHERE agent_id = %s AND key = %s",
                  (gene_id, agent_id, key))

    def delete(self, agent_id: str, keys: list[str]) -> None:
        if keys:
            self._run("DELETE FROM memory_entries WHERE agent_id = %s AND key = ANY(%s)",
                      (agent_id, keys))

    def _pages(self, sql: str, params: tuple[Any, ...], after_sql: str,
               after_of: Any, first: int = BATCH) -> Iterator[tuple[Any, ...]]:
        """Keyset pagination: each page is fetched whole, so the caller may
        write between pages without disturbing an open cursor.  Pages start
        at ``first`` rows and double up to :data:`BATCH`."""
        after: tuple[Any, ...] = ()
        size = first
        while True:
            rows = self._all(sql.format(after=after_sql if after else "", limit=size),
                             params + after)
            yield from rows
            if len(rows) < size:
                return
            after = after_of(rows[-1])
            size = min(2 * size, BATCH)

    def iter_expired(self, agent_id: str, now_us: int) -> Iterator[Brief]:
        sql = (f"SELECT expires_us, {BRIEF_COLUMNS} FROM memory_entries WHERE agent_id = %s "
               "AND expires_us IS NOT NULL AND expires_us <= %s {after} "
               f"ORDER BY expires_us, seq LIMIT {{limit}}")
        for r in self._pages(sql, (agent_id, now_us), "AND (expires_us, seq) > (%s, %s)",
                             lambda r: (r[0], r[5]), FIRST_PAGE):
            yield make_brief(r[1:])

    def iter_oldest(self, agent_id: str, category: Category) -> Iterator[Brief]:
        sql = (f"SELECT {BRIEF_COLUMNS} FROM memory_entries WHERE agent_id = %s "
               f"AND category = %s {{after}} ORDER BY updated_us, seq LIMIT {{limit}}")
        for r in self._pages(sql, (agent_id, category.value),
                             "AND (updated_us, seq) > (%s, %s)", lambda r: (r[3], r[4]),
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
        if key_prefix and not _storable(key_prefix):
            return  # no stored key contains NUL or a lone surrogate
        where = ["agent_id = %s"]
        params: list[Any] = [agent_id]
        if category is not None:
            where.append("category = %s")
            params.append(category.value)
        if key_prefix:
            # The column is COLLATE "C", so these compare byte for byte.
            where.append("key >= %s")
            params.append(key_prefix)
            upper = prefix_upper_bound(key_prefix)
            if upper is not None:
                where.append("key < %s")
                params.append(upper)
        if since_us is not None:
            where.append("updated_us >= %s")
            params.append(since_us)
        if until_us is not None:
            where.append("updated_us < %s")
            params.append(until_us)
        sql = (f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE {' AND '.join(where)} {{after}} "
               f"ORDER BY updated_us DESC, seq DESC LIMIT {{limit}}")
        for r in self._pages(sql, tuple(params), "AND (updated_us, seq) < (%s, %s)",
                             lambda r: (r[8], r[14])):
            row = make_row(r)
            if key_prefix and not row.key.startswith(key_prefix):
                continue  # belt and braces: the range above is exact already
            yield row

    def count(self, agent_id: str) -> int:
        r = self._one("SELECT count(*) FROM memory_entries WHERE agent_id = %s", (agent_id,))
        return int(r[0]) if r else 0

    def log_lines(self, agent_id: str, seq: int, lines: list[str]) -> None:
        """One statement for all of a change's lines; ids (commit order per agent,
        as the agent's row lock is held) come from the sequence."""
        self._run("INSERT INTO memory_audit (agent_id, seq, line) "
                  "SELECT %s, %s, unnest(%s::text[])", (agent_id, seq, lines))

    def audit_lines(self, agent_id: str) -> list[dict[str, Any]] | None:
        rows = self.conn.execute("SELECT line FROM memory_audit WHERE agent_id = %s "
                                 "ORDER BY id", (agent_id,)).fetchall()
        return [json.loads(r[0]) for r in rows]

    def sum_sizes(self, agent_id: str) -> int:
        r = self._one("SELECT coalesce(sum(size), 0)::bigint FROM memory_entries "
                      "WHERE agent_id = %s", (agent_id,))
        return int(r[0]) if r else 0


def _retryable(exc: psycopg.Error, conn: Connection) -> bool:
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


class PostgresBackend:
    """PostgreSQL behind the backend interface; safe across threads and processes."""

    name = "postgresql"
    keeps_audit = True

    def __init__(self, url: str, *, max_idle: int = MAX_IDLE,
                 lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
        self.url = url
        #: Where the memory lives, for messages and the audit log (no password).
        self.location = describe_url(url)
        try:
            given = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise storage(f"invalid PostgreSQL memory URL: {_first_line(exc)}") from exc
        self._conninfo = make_conninfo(
            url, **{k: v for k, v in CONNECT_DEFAULTS.items() if k not in given})
        self._max_idle = max_idle
        # A lock_timeout given in the URL (options=-c lock_timeout=...) wins.
        self._lock_timeout_ms = None if "lock_timeout" in str(given.get("options", "")) \
            else int(lock_timeout_ms)
        self._lock = threading.Lock()
        self._idle: list[tuple[Connection, float]] = []  # (connection, idle since)
        #: Idle seconds after which ``peek()`` checks a pooled connection first.
        self.ping_after_s = PING_AFTER_S
        self._inherited: list[Connection] = []  # kept alive, never closed (see _take)
        self._pid = os.getpid()
        self._closed = False
        self.schema = ""
        self._setup()

    # -- connections ----------------------------------------------------------

    def _open(self) -> Connection:
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise storage(f"cannot connect to the memory database at {self.location}: "
                          f"{_first_line(exc)}") from exc
        try:
            if self._lock_timeout_ms is not None:
                conn.execute(f"SET lock_timeout = {self._lock_timeout_ms}")
        except psycopg.Error as exc:
            conn.close()
            raise storage(f"the memory database at {self.location} is not usable: "
                          f"{_first_line(exc)}") from exc
        return conn

    def _take(self, *, ping: bool = False) -> Connection:
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

    def _give_back(self, conn: Connection) -> None:
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

    def _rollback(self, conn: Connection) -> None:
        if conn.closed or conn.broken:
            return
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            with suppress(Exception):
                conn.close()

    # -- set-up ---------------------------------------------------------------

    def _setup(self) -> None:
        conn = self._take()
        try:
            encoding = conn.execute("SHOW server_encoding").fetchone()
            if encoding is None or str(encoding[0]).upper() not in ("UTF8", "UTF-8"):
                raise storage(
                    f"the memory database at {self.location} must use UTF8 encoding "
                    f"(it uses {encoding[0] if encoding else 'unknown'}), so keys order by "
                    "code point")
            current = conn.execute("SELECT current_schema()").fetchone()
            if current is None or current[0] is None:
                raise storage(f"the memory database at {self.location} has no schema to use "
                              "(check search_path)")
            self.schema = str(current[0])
            conn.execute("BEGIN")
            # One creator at a time: concurrent CREATE TABLE IF NOT EXISTS can collide.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key("\x00schema"),))
            conn.execute(SCHEMA.split(";", 1)[0])  # memory_meta, to read the version
            version = conn.execute(
                "SELECT value FROM memory_meta WHERE name = 'schema_version'").fetchone()
            known = int(version[0]) if version is not None and version[0].isdigit() else None
            if version is not None and (known is None or known > SCHEMA_VERSION):
                raise storage(
                    f"the memory database at {self.location} has schema version "
                    f"{version[0]}; this rotifer knows up to {SCHEMA_VERSION} (upgrade rotifer)")
            if known is not None and known < SCHEMA_VERSION:
                for number in range(known + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS[number]:
                        conn.execute(statement)
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute("INSERT INTO memory_meta VALUES ('schema_version', %s) "
                         "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                         (str(SCHEMA_VERSION),))
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            self._rollback(conn)
            self._give_back(conn)
            self.close()
            raise storage(f"the memory database at {self.location} is not usable: "
                          f"{_first_line(exc)}") from exc
        except BaseException:
            self._rollback(conn)
            self._give_back(conn)
            self.close()
            raise
        self._give_back(conn)

    def _lock_key(self, agent_id: str) -> int:
        """A signed 64-bit advisory lock key for (schema, agent id)."""
        digest = hashlib.sha256(
            b"rotifer-memory\x00" + self.schema.encode() + b"\x00"
            + agent_id.encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def _lock_agent(self, conn: Connection, agent_id: str) -> None:
        if not _storable(agent_id):
            return  # no such agent can exist; the store will find none
        if conn.execute(LOCK_AGENT_SQL, (agent_id,)).fetchone() is not None:
            return
        # No row to lock yet: queue with everyone else who found none, then look again.
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key(agent_id),))
        conn.execute(LOCK_AGENT_SQL, (agent_id,)).fetchone()

    def _begin(self, statement: str, agent_id: str | None) -> Connection:
        """Begin a transaction (and lock the agent), retrying what is safe to retry."""
        for attempt in range(BEGIN_ATTEMPTS):
            conn = self._take()
            try:
                conn.execute(statement)
                if agent_id is not None:
                    self._lock_agent(conn, agent_id)
                return conn
            except psycopg.Error as exc:
                again = _retryable(exc, conn) and attempt + 1 < BEGIN_ATTEMPTS
                self._rollback(conn)
                self._give_back(conn)
                if not again:
                    raise storage(f"memory store failed: {_first_line(exc)}") from exc
                time.sleep(random.uniform(0.001, 0.01) * (2 ** attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _transaction(self, statement: str, agent_id: str | None
                     ) -> Iterator[PostgresTransaction]:
        conn = self._begin(statement, agent_id)
        try:
            yield PostgresTransaction(conn)
        except BaseException as exc:
            self._rollback(conn)
            self._give_back(conn)
            if isinstance(exc, psycopg.Error | UnicodeEncodeError):
                raise storage(f"memory store failed: {_first_line(exc)}") from exc
            raise
        try:
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            self._rollback(conn)
            self._give_back(conn)
            raise storage(f"memory store failed to commit: {_first_line(exc)}") from exc
        self._give_back(conn)

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
        conn = self._take(ping=True)
        try:
            yield PostgresTransaction(conn)
        except (psycopg.Error, UnicodeEncodeError) as exc:
            self._give_back(conn)
            raise storage(f"memory store failed: {_first_line(exc)}") from exc
        except BaseException:
            self._give_back(conn)
            raise
        self._give_back(conn)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            mine = os.getpid() == self._pid
        if mine:
            for conn, _ in idle:
                with suppress(Exception):
                    conn.close()


__all__ = ["PostgresBackend", "PostgresTransaction", "describe_url"]
