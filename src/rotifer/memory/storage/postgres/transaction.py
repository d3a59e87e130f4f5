"""The SQL of each backend operation, over one connection in a transaction,
and when each statement goes out.

Round trips, not statements, are what a memory call pays for (a write was six
of them).  So a transaction here sends as little as it can on its own:

* **It begins with its first statement.**  The agent's row lock and that
  first statement go out together as one pipeline (:mod:`.pipeline`: each a
  statement of its own, with binary parameters and results, prepared where
  allowed, all written at once) and cost one round trip.  A change sends no
  ``BEGIN``: that round trip ends with a ``Flush``, not a ``Sync``, which
  opens the protocol's implicit transaction, and the ``Sync`` of its last
  round trip commits it (:attr:`PostgresTransaction.implicit`).  Behind a
  transaction-mode pooler, and for reads and long-running transactions,
  ``BEGIN`` (with the pooler's ``SET LOCAL``s) goes first in that round trip
  instead.  Each statement after the lock takes a fresh snapshot
  (READ COMMITTED), so what the lookup returns is what the agent's last
  committer left -- never a row read before the lock wait ended.  Opening,
  and retrying that first round trip, is the backend's :class:`Opener`.
* **Writes whose result the rules do not read wait**: the entry's upsert,
  deletes, ``lastAccessedBy``, the counter update and the audit rows are
  queued and go out with the next statement that needs an answer, or with
  ``COMMIT`` -- after the store appended the change's audit lines to the log,
  so the log is still written ahead of the commit.  Any of them failing fails
  the whole pipeline: the transaction is rolled back, nothing is half written,
  and the store settles the change (``rolled_back``) as for a failed commit.
  Queued writes to distinct tables travel as **one statement**
  (:func:`~.folding.folded`: ``WITH w0 AS (upsert), w1 AS (audit row), ...
  UPDATE counters``), so a write's second round trip is that statement and
  the ``Sync`` that commits it: three statements in all.
  Only a transaction that holds the agent's row lock defers (then the counter
  update cannot miss its row), and a long-running one (a move, an import)
  never does: its statements go out one by one, each bounded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import suppress
from typing import Any, Final, Protocol

import psycopg

from ...clock import Clock
from ...errors import storage
from ...model import Category
from ..backend import AgentRecord, Brief, Row
from ..index_sql import ENTRY_COLUMNS, IndexRow, IndexSql
from ..sql_text import AGENT_COLUMNS, ROW_COLUMNS, put_sql
from ..sql_transaction import LOOKUP_EXPIRY_AT, SqlTransaction, Statements
from .folding import folded
from .pipeline import Params, Result, Statement, pipelined
from .rows import make_row, row_params, storable

Connection = psycopg.Connection[tuple[Any, ...]]

#: Audit lines read per statement by :meth:`PostgresTransaction.audit_lines`.
AUDIT_PAGE: Final = 2000
#: A change's index rows in one statement: each column as an array.
INDEX_INSERT: Final = (
    f"INSERT INTO memory_audit_index (agent_id, {ENTRY_COLUMNS}) SELECT * FROM unnest("
    "%s::text[], %s::bigint[], %s::bigint[], %s::int[], %s::bigint[], %s::text[], "
    "%s::bigint[], %s::text[], %s::bigint[], %s::text[], %s::bigint[], %s::bytea[]) "
    "ON CONFLICT DO NOTHING")
#: One index row (the common case: a change of one line), without the arrays:
#: psycopg dumps an array parameter in Python, a scalar in C.
INDEX_INSERT_ONE: Final = (
    f"INSERT INTO memory_audit_index (agent_id, {ENTRY_COLUMNS}) VALUES "
    f"({', '.join(['%s'] * (1 + len(ENTRY_COLUMNS.split(','))))}) ON CONFLICT DO NOTHING")
LOG_LINES_SQL: Final = ("INSERT INTO memory_audit (agent_id, seq, line) "
                        "SELECT %s, %s, unnest(%s::text[])")
LOG_LINE_SQL: Final = "INSERT INTO memory_audit (agent_id, seq, line) VALUES (%s, %s, %s)"
INDEX_SELECT: Final = (f"SELECT {ENTRY_COLUMNS} FROM memory_audit_index WHERE agent_id = %s "
                       "ORDER BY file_no, off")
#: Deferred statements kept at most; more are sent (one round trip) first.
MAX_QUEUED: Final = 32

PUT_SQL: Final = put_sql("%s")
LOCK_AGENT_SQL: Final = "SELECT 1 FROM memory_agents WHERE agent_id = %s FOR UPDATE"
#: :func:`~rotifer.memory.storage.sql_text.lookup_sql` without the clock: the agent's earliest expiry instead of
#: "has anything expired by now?", so it can travel with the lock and the clock
#: be read once the lock is held (the partial expiry index answers it).
#: Parameters: key, agent id.
LOOKUP_AT_LOCK_SQL: Final = (
    "SELECT " + ", ".join(f"a.{c}" for c in AGENT_COLUMNS.split(", "))
    + ", (SELECT min(x.expires_us) FROM memory_entries x WHERE x.agent_id = a.agent_id "
    "AND x.expires_us IS NOT NULL), "
    + ", ".join(f"e.{c}" for c in ROW_COLUMNS.split(", "))
    + " FROM memory_agents a LEFT JOIN memory_entries e ON e.agent_id = a.agent_id "
    "AND e.key = %s WHERE a.agent_id = %s")
#: Note a reader in lastAccessedBy, outside any transaction, only if the entry
#: is still the one the reader looked up (same change number, not expired by
#: the reader's time) and after any change holding the agent has ended (the
#: agent's row in KEY SHARE: it waits for a ``FOR UPDATE`` holder, as a change
#: would, and finds no row once the agent is gone).
#: Parameters: gene, agent, key, seq, now, agent.
TOUCH_IF_SQL: Final = (
    "UPDATE memory_entries SET last_accessed_by = %s WHERE agent_id = %s AND key = %s "
    "AND seq = %s AND (expires_us IS NULL OR expires_us > %s) "
    "AND EXISTS (SELECT 1 FROM memory_agents WHERE agent_id = %s FOR KEY SHARE)")


class Opener(Protocol):
    """How a lazily begun transaction gets its connection (see :mod:`.backend`):
    begin, lock the agent if any, then run ``first`` (if given) -- one round
    trip, retried while that is safe.  Returns the connection, the agent whose
    row is now locked (``None``: no agent, or it has no row), and ``first``'s
    cursor."""

    def __call__(self, first: Statement | None
                 ) -> tuple[Connection, str | None, Result | None]: ...


class PostgresTransaction(SqlTransaction):
    """:class:`~rotifer.memory.storage.backend.Transaction` over one psycopg connection.

    ``conn`` is ``None`` until the first statement (then ``opener`` begins the
    transaction with it); ``locked`` names the agent whose row this
    transaction holds, once it holds it."""

    __slots__ = ("_opener", "_queue", "_watch", "conn", "implicit", "locked")

    sql = Statements.using("%s")
    index_sql = IndexSql.using("%s")
    make_row = staticmethod(make_row)
    contains_sql = "strpos(lower(key), %s) > 0"
    checks_text = True  # no NUL, no lone surrogate in a PostgreSQL text column
    _storable = staticmethod(storable)

    def __init__(self, conn: Connection | None,
                 watch: tuple[Callable[[], None], Callable[[], None]] | None = None,
                 opener: Opener | None = None, *, implicit: bool = False) -> None:
        self.conn = conn
        #: Begun without ``BEGIN`` (see :mod:`.pipeline`): every round trip but
        #: the last ends with a ``Flush``, and the ``Sync`` of :meth:`commit`
        #: commits -- or that of :meth:`rollback` after ``ROLLBACK``.
        self.implicit = implicit
        #: For a long-running transaction: (start, stop) watching one statement.
        self._watch = watch
        self._opener = opener
        self._queue: list[Statement] = []
        self.locked: str | None = None

    @property
    def watch(self) -> tuple[Callable[[], None], Callable[[], None]] | None:
        return self._watch

    def _open(self, first: Statement | None) -> Result | None:
        assert self._opener is not None, "a transaction without a connection needs an opener"
        self.conn, self.locked, cur = self._opener(first)
        return cur

    def _send(self, sql: str, params: Params, *, read: bool = True) -> Result:
        """Run one statement whose result is needed, after whatever is queued,
        in one round trip (beginning the transaction with it if need be: only a
        read, which the opener may run again after waiting for a new agent)."""
        if self.conn is None:
            cur = self._open((sql, params) if read else None)
            if cur is not None:
                return cur
            assert self.conn is not None
        sync = not self.implicit
        if not self._queue:
            return pipelined(self.conn, [(sql, params)], sync=sync)[0]
        queue, self._queue = self._queue, []
        return pipelined(self.conn, [*folded(queue), (sql, params)], sync=sync)[-1]

    def _watched(self, sql: str, params: Params, read: bool) -> Result:
        """:meth:`_send`, and in a long-running transaction with the one
        statement watched (bounded on its own) while it runs."""
        if self._watch is None:
            return self._send(sql, params, read=read)
        self._watch[0]()
        try:
            return self._send(sql, params, read=read)  # the rows arrive with it
        finally:
            self._watch[1]()

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._watched(sql, params, True).fetchall()

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        return self._watched(sql, params, True).fetchone()

    def _run(self, sql: str, params: tuple[Any, ...]) -> int:
        return self._watched(sql, params, False).rowcount

    def _later(self, agent_id: str, sql: str, params: tuple[Any, ...]) -> None:
        """A write on ``agent_id`` whose outcome nothing reads: queued while this
        transaction holds that agent, else run now."""
        if self.locked != agent_id or self._watch is not None:
            self._run(sql, params)
            return
        if len(self._queue) >= MAX_QUEUED:
            self.flush()
        self._queue.append((sql, params))

    def flush(self) -> None:
        """Send what is queued (one round trip)."""
        if self._queue and self.conn is not None:
            queue, self._queue = self._queue, []
            pipelined(self.conn, folded(queue), sync=not self.implicit)

    def commit(self) -> None:
        """Send what is queued (:func:`folded`) and ``COMMIT`` -- or, begun
        without ``BEGIN``, the ``Sync`` that commits -- in one round trip."""
        assert self.conn is not None
        queue, self._queue = self._queue, []
        if self.implicit:
            pipelined(self.conn, folded(queue))
        else:
            pipelined(self.conn, [*folded(queue), ("COMMIT", None)])

    def rollback(self) -> None:
        """End a transaction begun without ``BEGIN`` with nothing of it kept:
        ``ROLLBACK`` and the ``Sync`` (one round trip; the server warns that
        no transaction block is open, and rolls the implicit one back).  A
        connection this fails on is closed, never reused."""
        assert self.conn is not None and self.implicit
        self._queue = []
        try:
            pipelined(self.conn, [("ROLLBACK", None)])
        except psycopg.Error:
            with suppress(Exception):
                self.conn.close()

    def discard_queued(self) -> None:
        """Forget what is queued (the transaction is being rolled back)."""
        self._queue = []

    # -- agents ---------------------------------------------------------------

    def insert_agent(self, record: AgentRecord) -> None:
        self._run(
            f"INSERT INTO memory_agents ({AGENT_COLUMNS}) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (record.agent_id, record.quota_bytes, record.data_policy.max_retention_days,
             record.data_policy.anonymization_supported, record.used_bytes, record.next_seq,
             record.last_us, record.epoch, record.head))

    def update_agent(self, agent_id: str, used_bytes: int, next_seq: int, last_us: int,
                     head: str = "") -> None:
        sql = ("UPDATE memory_agents SET used_bytes = %s, next_seq = %s, last_us = %s, "
               "head = %s WHERE agent_id = %s")
        params = (used_bytes, next_seq, last_us, head, agent_id)
        if self.locked == agent_id and self._watch is None:
            self._later(agent_id, sql, params)  # its row is locked by us: it is there
            return
        if self._run(sql, params) != 1:
            raise storage(f"agent {agent_id!r} has no memory")

    def delete_agent(self, agent_id: str) -> None:
        self._later(agent_id, "DELETE FROM memory_entries WHERE agent_id = %s", (agent_id,))
        self._later(agent_id, "DELETE FROM memory_agents WHERE agent_id = %s", (agent_id,))

    # -- entries --------------------------------------------------------------

    def oldest_to_free(self, agent_id: str, category: Category, need: int, passing: str
                       ) -> list[Brief]:
        victims: list[Brief] = []
        for brief in self.iter_oldest(agent_id, category):
            if brief.key == passing:
                continue
            victims.append(brief)
            need -= brief.size
            if need <= 0:
                break
        return victims

    def evict(self, agent_id: str, category: Category, victims: list[Brief], passing: str
              ) -> None:
        self.delete(agent_id, [v.key for v in victims])

    def lookup_holding(self, agent_id: str, key: str | None, clock: Clock
                       ) -> tuple[tuple[AgentRecord, bool, Row | None] | None, int]:
        """:meth:`lookup` as the first statement of a change, in the round trip that
        begins the transaction and locks the agent; the clock is read once that
        round trip is back, so with the lock held (see
        :meth:`rotifer.memory.storage.backend.Transaction.lookup_holding`).  Returns (what
        ``lookup`` returns, now)."""
        if self.conn is not None or not storable(agent_id):
            now = clock.now_us()
            return self.lookup(agent_id, key, now), now
        if key is not None and not storable(key):
            key = None
        r = self._one(LOOKUP_AT_LOCK_SQL, (key, agent_id))
        now = clock.now_us()
        if r is None:
            return None, now
        soonest = r[LOOKUP_EXPIRY_AT]
        return self._opened(r, soonest is not None and soonest <= now), now

    def touch_if(self, agent_id: str, key: str, gene_id: str, seq: int, now_us: int) -> bool:
        if not (storable(agent_id) and storable(key)):
            return False
        return self._run(TOUCH_IF_SQL, (gene_id, agent_id, key, seq, now_us, agent_id)) == 1

    def put(self, row: Row) -> None:
        self._later(row.agent_id, PUT_SQL, row_params(row))

    def touch(self, agent_id: str, key: str, gene_id: str) -> None:
        self._later(agent_id, "UPDATE memory_entries SET last_accessed_by = %s "
                    "WHERE agent_id = %s AND key = %s", (gene_id, agent_id, key))

    def delete(self, agent_id: str, keys: list[str]) -> None:
        if keys:
            self._later(agent_id, "DELETE FROM memory_entries WHERE agent_id = %s "
                        "AND key = ANY(%s)", (agent_id, keys))

    def log_lines(self, agent_id: str, seq: int, lines: list[str]) -> None:
        """One statement for all of a change's lines; ids (commit order per agent,
        as the agent's row lock is held) come from the sequence.  One line
        (most changes) is a plain ``VALUES`` row: no array to dump."""
        if len(lines) == 1:
            self._later(agent_id, LOG_LINE_SQL, (agent_id, seq, lines[0]))
            return
        self._later(agent_id, LOG_LINES_SQL, (agent_id, seq, lines))

    def audit_lines(self, agent_id: str) -> Iterator[dict[str, Any]] | None:
        return self._audit_pages(agent_id)

    def index_lines(self, rows: list[tuple[Any, ...]]) -> None:
        """One statement for all of a change's rows (columns as arrays; one row
        as plain values)."""
        if not rows:
            return
        if len(rows) == 1:
            self._later(rows[0][0], INDEX_INSERT_ONE, tuple(rows[0]))
            return
        columns = list(zip(*rows, strict=True))
        self._later(rows[0][0], INDEX_INSERT, tuple(list(c) for c in columns))

    def index_entries(self, agent_id: str) -> list[IndexRow]:
        return self._all(INDEX_SELECT, (agent_id,))

    def indexed(self, agent_id: str) -> tuple[str, bool] | None:
        row = self._one("SELECT epoch, simple FROM memory_audit_indexed WHERE agent_id = %s",
                        (agent_id,))
        return None if row is None else (str(row[0]), bool(row[1]))

    def set_indexed(self, agent_id: str, epoch: str, simple: bool,
                    rows: list[tuple[Any, ...]] | None = None) -> None:
        if rows is not None:
            self._run("DELETE FROM memory_audit_index WHERE agent_id = %s", (agent_id,))
            self.index_lines(rows)
        self._later(agent_id, "INSERT INTO memory_audit_indexed VALUES (%s, %s, %s) ON "
                    "CONFLICT (agent_id) DO UPDATE SET epoch = excluded.epoch, "
                    "simple = excluded.simple", (agent_id, epoch, simple))

    def _audit_pages(self, agent_id: str) -> Iterator[dict[str, Any]]:
        """Keyset pages of :data:`AUDIT_PAGE` lines by ``id``: memory stays
        flat however long the agent's history is."""
        after = 0
        while True:
            rows = self._all("SELECT id, line FROM memory_audit WHERE agent_id = %s AND id > %s "
                             f"ORDER BY id LIMIT {AUDIT_PAGE}", (agent_id, after))
            for r in rows:
                yield json.loads(r[1])
            if len(rows) < AUDIT_PAGE:
                return
            after = rows[-1][0]
