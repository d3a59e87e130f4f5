"""The SQL of each operation inside one SQLite transaction (the reading
statements are shared with PostgreSQL: :mod:`rotifer.memory.storage.sql_transaction`)."""

from __future__ import annotations

import sqlite3
from bisect import bisect_left
from collections.abc import Iterator
from itertools import accumulate, repeat
from operator import itemgetter
from typing import Any

from ...clock import Clock
from ...errors import storage
from ...model import Category
from ..backend import NEWEST_PAGE, AgentRecord, Brief, Row
from ..index_sql import ENTRY_COLUMNS, IndexRow, IndexSql
from ..sql_text import AGENT_COLUMNS, ROW_COLUMNS, newest_sql, prefix_upper_bound, put_sql
from ..sql_transaction import SqlTransaction, Statements, newest_position
from .rows import make_row, row_params

_new_brief = tuple.__new__
#: A cleanup candidate's size (the second column of ``OLDEST_SQL``).
_SIZE = itemgetter(1)

PUT_SQL = put_sql("?")
DELETE_CHUNK = 500
#: Cleanup's candidates in its order, on the cleanup index (agent, category,
#: updated_us, seq, and the row id every SQLite index ends in: ties, which the
#: store never makes, go in storage order).  Parameters: agent, category, the key
#: being written.
OLDEST_SQL = ("SELECT key, size, updated_us, seq, created_by FROM memory_entries "
              "WHERE agent_id = ? AND category = ? AND key <> ? ORDER BY updated_us, seq, rowid")
#: The victims before the last one's (updated_us, seq), as one range of the
#: cleanup index.  Parameters: agent, category, updated_us, seq, the key being written.
EVICT_BEFORE_SQL = ("DELETE FROM memory_entries WHERE agent_id = ? AND category = ? "
                    "AND (updated_us, seq) < (?, ?) AND key <> ?")
#: A key-prefix page's first probe looks through this many newest entries per
#: row it wants, and each later probe this many times more (see
#: :meth:`SqliteTransaction._newest_with_prefix`).
PROBE_FACTOR = 4
#: ``ROW_COLUMNS`` of the rows read by row id (``e``) in a page's join.
JOINED_COLUMNS = ", ".join(f"e.{c}" for c in ROW_COLUMNS.split(", "))
#: A row's updated_us and its seq: a page sorted in Python goes newest first by
#: the one, ties by the other (two stable sorts on ints: no key tuple per row).
_UPDATED_US = itemgetter(ROW_COLUMNS.split(", ").index("updated_us"))
_SEQ = itemgetter(ROW_COLUMNS.split(", ").index("seq"))
#: The statement reading a small key range whole, by its shape (see
#: :meth:`SqliteTransaction._newest_with_prefix`), made once per shape.
_WHOLE_RANGE: dict[tuple[bool, bool, bool, bool], str] = {}


def _whole_range_sql(bounded: bool, category: bool, since: bool, until: bool) -> str:
    """All of an agent's rows in a key range, unsorted, if it holds at most a page
    of keys (else none).  Parameters: agent, the range, the filters given
    (category, since, until), the page size, agent, the range, the page size + 1.
    The filters' columns are prefixed with ``+`` so that no index of theirs is
    taken: the scan is the key index's, over the range alone."""
    in_range = "key >= ?" + (" AND key < ?" if bounded else "")
    sql = f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = ? AND {in_range}"
    for given, condition in ((category, "+category = ?"), (since, "+updated_us >= ?"),
                             (until, "+updated_us < ?")):
        if given:
            sql += f" AND {condition}"
    sql += (" LIMIT (SELECT CASE WHEN count(*) <= ? THEN -1 ELSE 0 END FROM (SELECT 1 FROM "
            f"memory_entries WHERE agent_id = ? AND {in_range} LIMIT ?))")
    _WHOLE_RANGE[(bounded, category, since, until)] = sql
    return sql


#: Counting keys on the key index costs a fraction of probing a row: the key
#: range is chosen once it holds fewer than this many keys per probed row.
COUNT_FACTOR = 8


INDEX_INSERT = ("INSERT OR IGNORE INTO memory_audit_index (agent_id, " + ENTRY_COLUMNS
                + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
INDEX_SELECT = (f"SELECT {ENTRY_COLUMNS} FROM memory_audit_index WHERE agent_id = ? "
                "ORDER BY file_no, off")


class SqliteTransaction(SqlTransaction):
    """:class:`~rotifer.memory.storage.backend.Transaction` over one sqlite3 connection."""

    __slots__ = ("conn",)

    sql = Statements.using("?")
    index_sql = IndexSql.using("?")
    make_row = staticmethod(make_row)
    contains_sql = "instr(lower(key), ?) > 0"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def insert_agent(self, record: AgentRecord) -> None:
        self.conn.execute(
            f"INSERT INTO memory_agents ({AGENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (record.agent_id, record.quota_bytes, record.data_policy.max_retention_days,
             int(record.data_policy.anonymization_supported), record.used_bytes, record.next_seq,
             record.last_us, record.epoch, record.head))

    def update_agent(self, agent_id: str, used_bytes: int, next_seq: int, last_us: int,
                     head: str = "") -> None:
        cur = self.conn.execute(
            "UPDATE memory_agents SET used_bytes = ?, next_seq = ?, last_us = ?, head = ? "
            "WHERE agent_id = ?", (used_bytes, next_seq, last_us, head, agent_id))
        if cur.rowcount != 1:
            raise storage(f"agent {agent_id!r} has no memory")

    def delete_agent(self, agent_id: str) -> None:
        self.conn.execute("DELETE FROM memory_entries WHERE agent_id = ?", (agent_id,))
        self.conn.execute("DELETE FROM memory_agents WHERE agent_id = ?", (agent_id,))

    def put(self, row: Row) -> None:
        # An upsert, not INSERT OR REPLACE: replacing deletes the old row and
        # inserts a new one (every index entry twice, a 10 KiB value's overflow
        # pages freed and allocated again); updating in place is much cheaper.
        self.conn.execute(PUT_SQL, row_params(row))

    def touch(self, agent_id: str, key: str, gene_id: str) -> None:
        self.conn.execute(
            "UPDATE memory_entries SET last_accessed_by = ? WHERE agent_id = ? AND key = ?",
            (gene_id, agent_id, key))

    def touch_if(self, agent_id: str, key: str, gene_id: str, seq: int, now_us: int) -> bool:
        """One autocommit statement (see the backend interface); it takes the
        file's write lock for its moment, as any change does."""
        cur = self.conn.execute(
            "UPDATE memory_entries SET last_accessed_by = ? WHERE agent_id = ? AND key = ? "
            "AND seq = ? AND (expires_us IS NULL OR expires_us > ?)",
            (gene_id, agent_id, key, seq, now_us))
        return cur.rowcount == 1

    def delete(self, agent_id: str, keys: list[str]) -> None:
        # A statement per chunk of keys, not per key: an eviction of 100 entries
        # is one DELETE.
        for start in range(0, len(keys), DELETE_CHUNK):
            chunk = keys[start:start + DELETE_CHUNK]
            self.conn.execute(
                "DELETE FROM memory_entries WHERE agent_id = ? AND key IN "
                f"({', '.join('?' * len(chunk))})", (agent_id, *chunk))

    def lookup_holding(self, agent_id: str, key: str | None, clock: Clock
                       ) -> tuple[tuple[AgentRecord, bool, Row | None] | None, int]:
        # The write transaction holds the agent from its start (BEGIN
        # IMMEDIATE): read the clock, then look up.
        now = clock.now_us()
        return self.lookup(agent_id, key, now), now

    def oldest_to_free(self, agent_id: str, category: Category, need: int, passing: str
                       ) -> list[Brief]:
        """One statement read only about as far as needed: its rows are fetched in
        batches of as many as would free the rest were none larger than the
        largest seen so far (the first batch one row), and a batch is cut where
        its running sum reaches ``need`` (``bisect``).  With entries of one size
        that reads exactly the victims, with others a few more at most, where
        a later entry is larger than all before it; and no Python step per row
        (sqlite3 and ``zip`` make the rows and the Briefs), where the cursor was
        stepped a row at a time in Python.  (Pages of 16, 32 and 64 briefs, the
        way before that, read 112 rows for 100 victims.)"""
        cursor = self.conn.execute(OLDEST_SQL, (agent_id, category.value, passing))
        taken: list[tuple[Any, ...]] = []
        try:
            largest = 0
            while True:  # the first row at least, as PostgreSQL's (need is never <= 0)
                batch = cursor.fetchmany(-(-need // largest) if largest else 1)
                if not batch:
                    break
                sums = list(accumulate(map(_SIZE, batch)))
                if sums[-1] >= need:
                    taken += batch[:bisect_left(sums, need) + 1]
                    break
                taken += batch
                need -= sums[-1]
                largest = max(largest, 1, *map(_SIZE, batch))
        finally:
            cursor.close()
        if not taken:
            return []
        keys, sizes, updated, seqs, creators = zip(*taken, strict=True)
        return list(map(_new_brief, repeat(Brief, len(keys)),
                        zip(keys, repeat(category), sizes, updated, seqs, creators)))

    def evict(self, agent_id: str, category: Category, victims: list[Brief], passing: str
              ) -> None:
        """The victims are the first entries of the cleanup order (``passing``
        aside), so all but those tied with the last one are one range of the
        cleanup index, deleted without looking up each key (~0.4 µs a victim
        less than ``key IN (...)``); the ties (usually the last victim alone)
        go by key.  A range that is not exactly those victims -- ``victims``
        not what :meth:`oldest_to_free` returned -- fails the change."""
        if not victims:
            return
        last = victims[-1]
        tied = len(victims) - 1
        while tied and victims[tied - 1].updated_us == last.updated_us \
                and victims[tied - 1].seq == last.seq:
            tied -= 1
        if tied:
            cur = self.conn.execute(EVICT_BEFORE_SQL, (agent_id, category.value,
                                                       last.updated_us, last.seq, passing))
            if cur.rowcount != tied:
                raise storage(f"cleanup of {agent_id!r} found {cur.rowcount} entries before "
                              f"its last victim, not {tied}")
        self.delete(agent_id, [v.key for v in victims[tied:]])

    def iter_newest_rows(
        self,
        agent_id: str,
        *,
        category: Category | None = None,
        key_prefix: str | None = None,
        since_us: int | None = None,
        until_us: int | None = None,
        first: int = NEWEST_PAGE,
    ) -> Iterator[tuple[Any, ...]]:
        if not key_prefix:
            return super().iter_newest_rows(agent_id, category=category, since_us=since_us,
                                            until_us=until_us, first=first)
        size = min(first, NEWEST_PAGE)
        whole = self._whole_range(agent_id, category, key_prefix, since_us, until_us, size)
        if whole:  # a plain list's iterator: no generator to resume for each row
            return iter(whole)
        return self._newest_with_prefix(agent_id, category, key_prefix, since_us, until_us,
                                        size)

    def _whole_range(self, agent_id: str, category: Category | None, key_prefix: str,
                     since_us: int | None, until_us: int | None, size: int
                     ) -> list[tuple[Any, ...]]:
        """The matches, newest first, if the prefix holds at most ``size`` keys;
        else (or if none of them matches) nothing.

        A range of at most a page of keys (whatever their age) is the whole answer:
        one statement reads its rows on the key index, unsorted, and Python puts
        them newest first -- about the plain query's cost for a page of as many
        rows, where the race probed first (its window read in vain when the
        matches are old: 1.47x the plain query for 100 old matches among 10,000,
        1.04x for 100 recent ones, raw statements and sort, one run).  The count
        of the range (up to a page and one, on the key index alone) sits in the
        statement's LIMIT, which SQLite evaluates once before the scan: a larger
        range costs that count and reads no row, and the race runs."""
        bound = prefix_upper_bound(key_prefix)
        keys: tuple[str, ...] = (key_prefix,) if bound is None else (key_prefix, bound)
        shape = (bound is not None, category is not None, since_us is not None,
                 until_us is not None)
        whole = _WHOLE_RANGE.get(shape) or _whole_range_sql(*shape)
        filters = [v for v in (category.value if category is not None else None, since_us,
                               until_us) if v is not None]
        rows = self._all(whole, (agent_id, *keys, *filters, size, agent_id, *keys, size + 1))
        # Newest first: by seq, then (stable) by updated_us, both descending -- the
        # order (updated_us, seq) descending, without a key tuple made per row
        # (a page of 100 sorted in ~40% of the time, CPU time).
        rows.sort(key=_SEQ, reverse=True)
        rows.sort(key=_UPDATED_US, reverse=True)
        return rows

    def _newest_with_prefix(self, agent_id: str, category: Category | None, key_prefix: str,
                            since_us: int | None, until_us: int | None, size: int
                            ) -> Iterator[tuple[Any, ...]]:
        """The newest entries under ``key_prefix``, a page at a time, each page
        from whichever of two plans reaches it first (when the prefix holds more
        than a page of keys: :meth:`_whole_range` answers the others).

        SQLite has no statistics on how many keys share a prefix, so for
        ``key >= prefix AND key < bound ORDER BY updated_us DESC`` it always
        takes the key index and sorts every matching row, values included: the
        newest 10 of 9,897 matching keys cost ~100x the newest 10 of 100.  The
        two plans, raced in rounds that grow fourfold:

        * the probe: the ``window`` newest entries (their row ids on the recency
          or category index), keeping those under the prefix -- if there are a
          page of them, they are exactly the page (every other match is older);
        * the key range, once counting it (on the key index alone, up to
          ``COUNT_FACTOR`` x ``window`` keys) shows it holds fewer keys than
          that: then its sort is of no more rows than the probes read.

        So a page costs about the lesser of "newest entries until a page of
        matches" and "all matches" (times a small constant), whatever the agent
        holds.  Both plans are checked with EXPLAIN QUERY PLAN in the tests.

        Each plan sorts row ids only, never whole rows (values included): its
        statement picks the page's row ids in recency order in a subquery, and a
        ``CROSS JOIN`` reads the rows by row id in that order (SQLite keeps the
        left side of a ``CROSS JOIN`` the outer loop, and an ordered subquery
        yields its rows in its order), so the probe stops at the page's last
        match (``LIMIT size``) instead of reading its whole window and sorting
        the matches.  A probe for the 100 newest of 103 recent ``q/`` keys, in
        instructions (callgrind): 3.52M -> 2.25M a page; the key range of 100
        keys: 3.07M -> 2.47M.  ``test_query_plans.py`` checks both plans and
        that the pages match the newest-first reference."""
        bound = prefix_upper_bound(key_prefix)
        keys: tuple[str, ...] = (key_prefix,) if bound is None else (key_prefix, bound)
        inner, params = newest_sql("?", agent_id, category, None, since_us, until_us,
                                   columns="rowid AS r")

        def in_range(table: str) -> str:
            return f"{table}key >= ?{'' if bound is None else f' AND {table}key < ?'}"

        probe = (f"SELECT {JOINED_COLUMNS} FROM ({inner}) AS w CROSS JOIN memory_entries AS e "
                 f"ON e.rowid = w.r WHERE {in_range('e.')} LIMIT {{size}}")
        count = (f"SELECT count(*) FROM (SELECT 1 FROM memory_entries WHERE agent_id = ? "
                 f"AND {in_range('')} LIMIT ?)")
        by_key, key_params = newest_sql("?", agent_id, category, key_prefix, since_us,
                                        until_us, columns="rowid AS r")
        by_key = (f"SELECT {JOINED_COLUMNS} FROM ({by_key}) AS w CROSS JOIN memory_entries "
                  "AS e ON e.rowid = w.r")
        after: tuple[Any, ...] = ()
        while True:
            after_sql = self.sql.newest_after if after else ""
            window = PROBE_FACTOR * size
            while True:
                rows = self._all(probe.format(after=after_sql, limit=window, size=size),
                                 params + after + keys)
                if len(rows) >= size:
                    break
                cap = COUNT_FACTOR * window
                counted = self._one(count, (agent_id, *keys, cap))
                if counted is None or counted[0] < cap:
                    rows = self._all(by_key.format(after=after_sql, limit=size),
                                     key_params + after)
                    break
                window *= PROBE_FACTOR
            yield from rows
            if len(rows) < size:
                return
            after = newest_position(rows[-1])
            size = min(2 * size, NEWEST_PAGE)

    def log_lines(self, agent_id: str, seq: int, lines: list[str]) -> None:
        """SQLite keeps no copy: the one ``audit.jsonl`` beside it is the record."""

    def audit_lines(self, agent_id: str) -> Iterator[dict[str, Any]] | None:
        return None

    def index_lines(self, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            self.conn.executemany(INDEX_INSERT, rows)

    def index_entries(self, agent_id: str) -> list[IndexRow]:
        return self.conn.execute(INDEX_SELECT, (agent_id,)).fetchall()

    def indexed(self, agent_id: str) -> tuple[str, bool] | None:
        row = self.conn.execute("SELECT epoch, simple FROM memory_audit_indexed WHERE "
                                "agent_id = ?", (agent_id,)).fetchone()
        return None if row is None else (str(row[0]), bool(row[1]))

    def set_indexed(self, agent_id: str, epoch: str, simple: bool,
                    rows: list[tuple[Any, ...]] | None = None) -> None:
        if rows is not None:
            self.conn.execute("DELETE FROM memory_audit_index WHERE agent_id = ?", (agent_id,))
            self.index_lines(rows)
        self.conn.execute("INSERT INTO memory_audit_indexed VALUES (?, ?, ?) ON CONFLICT "
                          "(agent_id) DO UPDATE SET epoch = excluded.epoch, "
                          "simple = excluded.simple", (agent_id, epoch, int(simple)))
