"""What the SQLite and PostgreSQL transactions share: the reading statements,
their keyset pagination and the decoding of what they return.

Both backends keep the same tables and columns (:mod:`rotifer.memory.storage.backend`)
and differ in the placeholder (``?`` or ``%s``), in how a statement travels
(SQLite: one call on the connection; PostgreSQL: queued writes, pipelines,
a watched long-running transaction) and in which text they can store at all
(PostgreSQL's ``text`` takes no NUL and no lone surrogate).  So a subclass
gives :meth:`SqlTransaction._one` and :meth:`SqlTransaction._all`, its
:class:`Statements` and, where it must, :meth:`SqlTransaction._storable`;
the scans, lookups and counts are written once here.

Result columns are read by name (:data:`ROW_AT`, :data:`BRIEF_AT`), never by
a bare index; the one exception is the gene's lean query
(:mod:`rotifer.memory.views.gene_reads`), which unpacks each row in the order
of :data:`~rotifer.memory.storage.sql_text.ROW_NAMES` in one place.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, NamedTuple

from ..audit.actions import CHART_ACTIONS, ROLLED_BACK
from ..model import Category
from .backend import NEWEST_PAGE, AgentRecord, Brief, Row, Transaction
from .index_sql import IndexRow, IndexSql
from .rows import decode_agent, decode_brief
from .sql_text import (
    AGENT_COLUMNS,
    BRIEF_COLUMNS,
    FIRST_PAGE,
    LOOKUP_ROW_AT,
    ROW_COLUMNS,
    browse_sql,
    category_usage_sql,
    expired_sql,
    lookup_sql,
    newest_after,
    newest_sql,
    oldest_sql,
    pages,
    read_sql,
)

#: Where each column of a ``ROW_COLUMNS`` result row is.
ROW_AT: dict[str, int] = {c: i for i, c in enumerate(ROW_COLUMNS.split(", "))}
#: Where each column of a ``BRIEF_COLUMNS`` result row is.
BRIEF_AT: dict[str, int] = {c: i for i, c in enumerate(BRIEF_COLUMNS.split(", "))}
#: ``lookup``'s result row: the agent's columns, then the expiry answer at
#: :data:`LOOKUP_EXPIRY_AT`, then the entry's ``ROW_COLUMNS``.
LOOKUP_EXPIRY_AT = LOOKUP_ROW_AT - 1

_ROW_UPDATED, _ROW_SEQ, _ROW_KEY = ROW_AT["updated_us"], ROW_AT["seq"], ROW_AT["key"]
_BRIEF_UPDATED, _BRIEF_SEQ = BRIEF_AT["updated_us"], BRIEF_AT["seq"]


def newest_position(r: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``ROW_COLUMNS`` row's place in the newest-first order (the next page's start)."""
    return r[_ROW_UPDATED], r[_ROW_SEQ]


def _key_position(r: tuple[Any, ...]) -> tuple[Any, ...]:
    return (r[_ROW_KEY],)


def _oldest_position(r: tuple[Any, ...]) -> tuple[Any, ...]:
    return r[_BRIEF_UPDATED], r[_BRIEF_SEQ]


def _expired_position(r: tuple[Any, ...]) -> tuple[Any, ...]:
    # ``expires_us`` leads, the brief follows.
    return r[0], r[1 + _BRIEF_SEQ]


class Statements(NamedTuple):
    """The shared reading statements with one backend's placeholder."""

    placeholder: str
    lookup: str
    read: str
    get: str
    get_agent: str
    expired: str
    expired_after: str
    oldest: str
    oldest_after: str
    newest_after: str
    category_usage: str

    @classmethod
    def using(cls, p: str) -> Statements:
        expired, expired_after = expired_sql(p)
        oldest, oldest_after = oldest_sql(p)
        return cls(
            p, lookup_sql(p), read_sql(p),
            f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE agent_id = {p} AND key = {p}",
            f"SELECT {AGENT_COLUMNS} FROM memory_agents WHERE agent_id = {p}",
            expired, expired_after, oldest, oldest_after, newest_after(p),
            category_usage_sql(p))


class SqlTransaction(Transaction):
    """The shared part of :class:`~rotifer.memory.storage.backend.Transaction` over SQL.

    ``make_row`` decodes a ``ROW_COLUMNS`` result row (each backend parses its
    stored retention policy its own way)."""

    __slots__ = ()

    sql: ClassVar[Statements]
    index_sql: ClassVar[IndexSql]

    # -- the history index's reads (see rotifer.memory.audit.index) ---------------

    def index_summary(self, agent_id: str) -> list[tuple[Any, ...]]:
        return self._all(self.index_sql.summary, (ROLLED_BACK, agent_id))

    def index_of_action(self, agent_id: str, action: str) -> list[IndexRow]:
        return self._all(self.index_sql.of_action, (agent_id, action))

    def index_page(self, agent_id: str, before: tuple[int, int], since_us: int, until_us: int,
                   without: str, key_hash: int | None, limit: int) -> list[IndexRow]:
        file_no, off = before
        return self._all(self.index_sql.page, (agent_id, file_no, file_no, off, since_us,
                                               until_us, without, key_hash is None, key_hash,
                                               limit))

    def index_last_committed(self, agent_id: str) -> int | None:
        row = self._one(self.index_sql.last, (agent_id, ROLLED_BACK))
        return None if row is None else int(row[0])

    def index_steps(self, agent_id: str) -> list[tuple[Any, ...]]:
        return self._all(self.index_sql.steps, (agent_id, *CHART_ACTIONS))

    def _one(self, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
        raise NotImplementedError

    def _all(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    @staticmethod
    def make_row(r: tuple[Any, ...]) -> Row:
        raise NotImplementedError

    #: The backend's substring test on ``lower(key)`` (see ``sql_text.browse_sql``).
    contains_sql: ClassVar[str]

    #: Whether some text cannot be stored at all (see :meth:`_storable`): checked
    #: with an attribute, not a call, on backends that store every string.
    checks_text: ClassVar[bool] = False

    @staticmethod
    def _storable(text: str) -> bool:
        """Can ``text`` be stored at all?  If not, no stored agent id or key
        equals it, and a lookup of it finds nothing (only with ``checks_text``)."""
        return True

    def _opened(self, r: tuple[Any, ...], expired: bool
                ) -> tuple[AgentRecord, bool, Row | None]:
        """A :meth:`lookup` result row decoded: the agent, ``expired``, the entry."""
        at = LOOKUP_ROW_AT
        return (decode_agent(r[:LOOKUP_EXPIRY_AT]), expired,
                None if r[at] is None else self.make_row(r[at:]))

    # -- agents ---------------------------------------------------------------

    def get_agent(self, agent_id: str) -> AgentRecord | None:
        if self.checks_text and not self._storable(agent_id):
            return None
        r = self._one(self.sql.get_agent, (agent_id,))
        return None if r is None else decode_agent(r)

    def list_agents(self) -> list[str]:
        return [r[0] for r in self._all("SELECT agent_id FROM memory_agents ORDER BY agent_id",
                                        ())]

    # -- entries --------------------------------------------------------------

    def get(self, agent_id: str, key: str) -> Row | None:
        if self.checks_text and not (self._storable(agent_id) and self._storable(key)):
            return None
        r = self._one(self.sql.get, (agent_id, key))
        return None if r is None else self.make_row(r)

    def _lookup_row(self, agent_id: str, key: str | None, now_us: int
                    ) -> tuple[Any, ...] | None:
        """The lookup statement's one row: the agent's columns, "has anything
        expired?", the entry's columns (None: no such agent)."""
        if self.checks_text:
            if not self._storable(agent_id):
                return None
            if key is not None and not self._storable(key):
                key = None  # no stored key can equal it
        return self._one(self.sql.lookup, (now_us, key, agent_id))

    def lookup(self, agent_id: str, key: str | None, now_us: int
               ) -> tuple[AgentRecord, bool, Row | None] | None:
        r = self._lookup_row(agent_id, key, now_us)
        if r is None:
            return None
        # Decoded here rather than through _opened: every call starts with this.
        at = LOOKUP_ROW_AT
        return (decode_agent(r[:LOOKUP_EXPIRY_AT]), bool(r[LOOKUP_EXPIRY_AT]),
                None if r[at] is None else self.make_row(r[at:]))

    def read_entry(self, agent_id: str, key: str, now_us: int) -> tuple[Any, ...] | None:
        if self.checks_text:
            if not self._storable(agent_id):
                return None
            if not self._storable(key):
                return self._one(self.sql.read, (now_us, None, agent_id))
        return self._one(self.sql.read, (now_us, key, agent_id))

    def iter_expired(self, agent_id: str, now_us: int) -> Iterator[Brief]:
        for r in pages(self._all, self.sql.expired, (agent_id, now_us), self.sql.expired_after,
                       _expired_position, FIRST_PAGE):
            yield decode_brief(r[1:])

    def iter_oldest(self, agent_id: str, category: Category) -> Iterator[Brief]:
        for r in pages(self._all, self.sql.oldest, (agent_id, category.value),
                       self.sql.oldest_after, _oldest_position, FIRST_PAGE):
            yield decode_brief(r)

    def iter_newest(
        self,
        agent_id: str,
        *,
        category: Category | None = None,
        key_prefix: str | None = None,
        since_us: int | None = None,
        until_us: int | None = None,
        first: int = NEWEST_PAGE,
    ) -> Iterator[Row]:
        make_row = self.make_row
        for r in self.iter_newest_rows(agent_id, category=category, key_prefix=key_prefix,
                                       since_us=since_us, until_us=until_us, first=first):
            row = make_row(r)
            if key_prefix and not row.key.startswith(key_prefix):
                continue  # belt and braces: the range above is exact already
            yield row

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
        if key_prefix and self.checks_text and not self._storable(key_prefix):
            return iter(())  # no stored key starts with it
        sql, params = newest_sql(self.sql.placeholder, agent_id, category, key_prefix,
                                 since_us, until_us)
        return pages(self._all, sql, params, self.sql.newest_after, newest_position,
                     min(first, NEWEST_PAGE))

    def iter_by_key(self, agent_id: str, *, category: Category | None = None,
                    after: str | None = None, first: int = NEWEST_PAGE) -> Iterator[Row]:
        p = self.sql.placeholder
        where = [f"agent_id = {p}"]
        params: list[Any] = [agent_id]
        if category is not None:
            where.append(f"category = {p}")
            params.append(category.value)
        if after is not None:
            where.append(f"key > {p}")
            params.append(after)
        sql = (f"SELECT {ROW_COLUMNS} FROM memory_entries WHERE {' AND '.join(where)} "
               "{after} ORDER BY key LIMIT {limit}")
        make_row = self.make_row
        for r in pages(self._all, sql, tuple(params), f"AND key > {p}", _key_position,
                       min(first, NEWEST_PAGE)):
            yield make_row(r)

    def count(self, agent_id: str) -> int:
        r = self._one(f"SELECT count(*) FROM memory_entries WHERE agent_id = "
                      f"{self.sql.placeholder}", (agent_id,))
        return int(r[0]) if r else 0

    def sum_sizes(self, agent_id: str) -> int:
        r = self._one("SELECT CAST(coalesce(sum(size), 0) AS BIGINT) FROM memory_entries "
                      f"WHERE agent_id = {self.sql.placeholder}", (agent_id,))
        return int(r[0]) if r else 0

    # -- the deployer's listing (rotifer.memory.views.browse) ----------------------------

    def browse(self, agent_id: str, **page: Any) -> list[tuple[Row, int]]:
        sql, params = browse_sql(self.sql.placeholder, self.contains_sql, agent_id, **page)
        return [(self.make_row(r[:-1]), int(r[-1])) for r in self._all(sql, params)]

    def category_usage(self, agent_id: str) -> dict[Category, tuple[int, int]]:
        return {Category(r[0]): (int(r[1]), int(r[2]))
                for r in self._all(self.sql.category_usage, (agent_id,))}
