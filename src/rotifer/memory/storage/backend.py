"""The interface every storage backend implements: declarations only.

Nothing here has a body a backend would inherit: a backend's module is all
that backend does.  The interface is not small (an agent's record, its
entries, the scans below, the lean paths' undecoded reads, the backend's own
copy of the audit lines, the history index), but each member is something a
rule above needs from storage and nothing else gives it.

The policy rules (scopes, data policy, quota, cleanup order, retention, audit)
live above this interface (:mod:`rotifer.memory.engine`,
:mod:`rotifer.memory.views`) and are written once.  A backend only stores rows
and hands them back in the orders the rules need:

* ``iter_oldest``: one category's entries, least recently updated first
  (ties in write order) -- the cleanup order;
* ``iter_newest``: entries most recently updated first -- the query order;
* ``iter_expired``: entries whose expiry time has passed.

All three walk an index, so nothing scans a whole agent.  The SQL both SQL
backends run for them is :mod:`rotifer.memory.storage.sql_text`.  Each write
transaction holds the agent exclusively (SQLite ``BEGIN IMMEDIATE``,
PostgreSQL a row lock on the agent), so the running byte total and the quota
check can never race.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..clock import Clock
from ..model import AccessPolicy, Category, DataPolicy, RetentionPolicy

if TYPE_CHECKING:
    from .index_sql import IndexRow

#: The largest page ``iter_newest`` fetches (its pages start at ``first`` rows,
#: a query's limit, and double up to this).  A query whose answer lies within
#: the first page needs no snapshot beyond that one statement, so it runs
#: outside a transaction (gene_memory.query_memory).
NEWEST_PAGE = 256


class AgentRecord(NamedTuple):
    """An agent's memory settings and counters (a named tuple: every call
    decodes one, and a tuple is built in a third of a frozen dataclass's time)."""

    agent_id: str
    quota_bytes: int
    data_policy: DataPolicy
    used_bytes: int
    #: The number the agent's next change gets (see :mod:`rotifer.memory.engine.changes`);
    #: an entry's ``seq`` is the number of the change that last wrote it.
    next_seq: int
    #: The time of the agent's last committed change (0: none since this was added).
    last_us: int = 0
    #: Which memory of the agent this is: a random id given when it was created
    #: here (``agent create``, ``import``, ``move``); its changes' audit lines
    #: carry it (``""``: made before epochs were, lines without it).  See
    #: :mod:`rotifer.memory.audit.lineage`.
    epoch: str = ""
    #: The anchor: the hash of the last audit line of the agent's last committed
    #: change, committed with it (``""``: none yet).  See :mod:`rotifer.memory.audit.verify`.
    head: str = ""


class Row(NamedTuple):
    """One stored entry, with what the rules need beyond the seed's fields.

    A named tuple rather than a frozen dataclass: a query decodes one Row per
    entry, and building a tuple costs a third of setting thirteen slots."""

    agent_id: str
    key: str
    category: Category
    value: bytes
    created_by: str
    creator_domain: str | None
    last_accessed_by: str
    created_us: int
    updated_us: int
    access: AccessPolicy
    retention: RetentionPolicy | None
    expires_us: int | None
    seq: int

    @property
    def size(self) -> int:
        return len(self.key.encode()) + len(self.value)


class Brief(NamedTuple):
    """An entry without its value: enough to evict or expire it and audit that.

    A named tuple rather than a frozen dataclass: a write that evicts 100
    entries builds a Brief per candidate, and a tuple is built several times faster."""

    key: str
    category: Category
    size: int
    updated_us: int
    seq: int
    created_by: str


_tuple_new = tuple.__new__


def new_row(agent_id: str, key: str, category: Category, value: bytes, created_by: str,
            creator_domain: str | None, last_accessed_by: str, created_us: int,
            updated_us: int, access: AccessPolicy, retention: RetentionPolicy | None,
            expires_us: int | None, seq: int) -> Row:
    """``Row(...)``, the tuple built directly, without the named tuple's
    ``__new__`` (a Python function with keyword handling, a tenth of a
    decoded row's cost): for the backends' decoders, and the views' writes."""
    row: Row = _tuple_new(Row, (agent_id, key, category, value, created_by, creator_domain,
                                last_accessed_by, created_us, updated_us, access, retention,
                                expires_us, seq))
    return row


class Transaction(Protocol):
    """Operations inside one transaction of a backend."""

    __slots__ = ()

    def get_agent(self, agent_id: str) -> AgentRecord | None: ...

    def list_agents(self) -> list[str]: ...

    def insert_agent(self, record: AgentRecord) -> None: ...

    def update_agent(self, agent_id: str, used_bytes: int, next_seq: int, last_us: int,
                     head: str = "") -> None:
        """Commit a change's byte total, number, time and anchor (one statement)."""
        ...

    def delete_agent(self, agent_id: str) -> None:
        """Remove the agent and all its entries."""
        ...

    def get(self, agent_id: str, key: str) -> Row | None: ...

    def lookup(self, agent_id: str, key: str | None, now_us: int
               ) -> tuple[AgentRecord, bool, Row | None] | None:
        """What every call starts from, in one statement: the agent's record,
        whether any of its entries has expired by ``now_us``, and the entry
        ``key`` as stored (``None`` if there is none, or no key was given).

        ``None`` if the agent has no memory.  The row is returned even when it
        has expired; the caller purges first and then drops it.
        """
        ...

    def read_entry(self, agent_id: str, key: str, now_us: int) -> tuple[Any, ...] | None:
        """:meth:`lookup` for the lean read, undecoded: "has anything expired?",
        then the entry's ``READ_COLUMNS`` as stored (:mod:`rotifer.memory.storage.sql_text`;
        all ``None``: no such entry); ``None``: no such agent."""
        ...

    def put(self, row: Row) -> None:
        """Insert the row, or replace the one with the same (agent, key)."""
        ...

    def touch(self, agent_id: str, key: str, gene_id: str) -> None:
        """Set lastAccessedBy and nothing else."""
        ...

    def touch_if(self, agent_id: str, key: str, gene_id: str, seq: int, now_us: int) -> bool:
        """Outside a transaction (``peek``), one statement: set lastAccessedBy of
        ``key`` only if it is still the entry written by change ``seq`` and has
        not expired by ``now_us`` (and, on PostgreSQL, once no change holds the
        agent).  True if it was set; False means "look again, in a change".

        The one write ``peek`` allows: a read takes no change number and writes
        no audit line, so noting its reader needs neither the agent's lock nor
        a transaction of its own."""
        ...

    def delete(self, agent_id: str, keys: list[str]) -> None: ...

    def iter_expired(self, agent_id: str, now_us: int) -> Iterator[Brief]: ...

    def iter_oldest(self, agent_id: str, category: Category) -> Iterator[Brief]: ...

    def oldest_to_free(self, agent_id: str, category: Category, need: int, passing: str
                       ) -> list[Brief]:
        """What cleanup takes from ``category`` to free ``need`` bytes: its entries
        in ``iter_oldest``'s order but ``passing`` (the entry being written), as
        many as free ``need`` -- all of them if together they free less."""
        ...

    def evict(self, agent_id: str, category: Category, victims: list[Brief], passing: str
              ) -> None:
        """Delete ``victims``: what :meth:`oldest_to_free` returned for ``category``
        and ``passing`` in this transaction (a backend may delete them as the
        range of the cleanup order they are)."""
        ...

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
        """Matching rows, most recently updated first (ties: latest write first).

        ``key_prefix`` is a plain prefix compared by code point (= UTF-8 byte
        order), never a pattern.  The rows are fetched in pages of ``first``
        rows, doubling up to :data:`NEWEST_PAGE`: a caller that wants the
        newest ten asks for ``first=10``, and the first statement then costs
        what ten rows cost however many match.
        """
        ...

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
        """:meth:`iter_newest`'s rows as stored, not decoded (the SQL backends'
        ``ROW_COLUMNS`` order, the retention as :meth:`Backend.retention_of` takes it):
        for the lean query (:mod:`rotifer.memory.views.gene_view`), which decodes only what
        an entry needs and hands anything unusual to the full path."""
        ...

    def iter_by_key(self, agent_id: str, *, category: Category | None = None,
                    after: str | None = None, first: int = NEWEST_PAGE) -> Iterator[Row]:
        """Entries in key order (code point), those after the key ``after`` if
        given, fetched in pages of ``first`` rows doubling up to
        :data:`NEWEST_PAGE`: the unique (agent, key) index serves it, so the
        first page of a listing costs what its rows cost."""
        ...

    def count(self, agent_id: str) -> int: ...

    def browse(self, agent_id: str, *, category: Category | None, key_prefix: str | None,
               creator: str | None, contains: str | None, sort: str,
               after: tuple[int, ...] | None, limit: int) -> list[tuple[Row, int]]:
        """A page of the deployer's listing (:func:`browse_sql`): each row with an
        empty value, and the entry's size."""
        ...

    def category_usage(self, agent_id: str) -> dict[Category, tuple[int, int]]:
        """(entries, bytes) per category that has any."""
        ...

    def log_lines(self, agent_id: str, seq: int, lines: list[str]) -> None:
        """Keep a change's audit lines (JSON text) in this transaction, if the
        backend keeps them (PostgreSQL: every worker's lines of an agent in one
        place, in commit order); otherwise nothing."""
        ...

    def audit_lines(self, agent_id: str) -> Iterator[dict[str, Any]] | None:
        """The agent's kept audit lines in commit order, streamed (a page at a
        time); ``None`` if this backend keeps none (the log files are then the
        only record)."""
        ...

    def index_lines(self, rows: list[tuple[Any, ...]]) -> None:
        """Add rows to the history index (:mod:`rotifer.memory.audit.index`) in
        this transaction; a row already there is kept."""
        ...

    def index_entries(self, agent_id: str) -> list[IndexRow]:
        """The agent's index rows, in log order (:data:`~.index_sql.ENTRY_COLUMNS`)."""
        ...

    def index_summary(self, agent_id: str) -> list[tuple[Any, ...]]:
        """Per epoch of the agent's rows: (epoch, newest committed change, newest seq)."""
        ...

    def index_of_action(self, agent_id: str, action: str) -> list[IndexRow]:
        """The agent's rows of one action, in log order."""
        ...

    def index_page(self, agent_id: str, before: tuple[int, int], since_us: int, until_us: int,
                   without: str, key_hash: int | None, limit: int) -> list[IndexRow]:
        """At most ``limit`` rows placed before ``before`` (file, offset), newest
        first: at or after ``since_us`` and before ``until_us``, not of action
        ``without``, of ``key_hash`` unless it is ``None``."""
        ...

    def index_steps(self, agent_id: str) -> list[tuple[Any, ...]]:
        """(ts_us, action, key_hash, category, nbytes) of the rows the chart follows."""
        ...

    def indexed(self, agent_id: str) -> tuple[str, bool] | None:
        """The epoch whose whole history the index holds for the agent, and whether
        every numbered row is that history's (``simple``), if the index is whole."""
        ...

    def set_indexed(self, agent_id: str, epoch: str, simple: bool,
                    rows: list[tuple[Any, ...]] | None = None) -> None:
        """Mark the index whole for the agent's memory ``epoch``; with ``rows``,
        first replace every row of the agent by them (a rebuild; ``[]``: a new
        memory, whose history starts here)."""
        ...

    def index_last_committed(self, agent_id: str) -> int | None:
        """The number of the newest indexed change of the agent (not a ``rolled_back`` line)."""
        ...

    def sum_sizes(self, agent_id: str) -> int:
        """Recount the bytes of an agent's entries (for checks, not hot paths)."""
        ...

    def lookup_holding(self, agent_id: str, key: str | None, clock: Clock
                       ) -> tuple[tuple[AgentRecord, bool, Row | None] | None, int]:
        """What a change starts from: :meth:`lookup` at a time read from ``clock``
        while the transaction holds the agent, and that time.

        A backend whose write transaction holds the agent from its start
        (SQLite) reads the clock, then looks up.  One that takes the agent's
        lock with its first statement (PostgreSQL) sends the lock and a
        clock-free lookup together and reads the clock when they are back --
        so the time is still taken with the agent held, never before waiting
        for it."""
        ...

class Backend(Protocol):
    """A storage backend: SQLite (embedded) or PostgreSQL (scale-out)."""

    #: A short name for messages and docs, e.g. ``"sqlite"``.
    name: str
    #: Where the memory lives, for messages and audit lines: a file's path, a
    #: database URL without its password.
    location: str
    #: The database schema the tables are in; ``""`` where there are none.
    schema: str = ""
    #: Whether gene calls try the lean paths first (:mod:`rotifer.memory.views.gene_view`).
    #: A lean path that hands over to the full one has already looked the entry
    #: up: on SQLite a repeated in-process statement (microseconds), on
    #: PostgreSQL repeated round trips (a write that evicts 3 -> 5, a read that
    #: notes a new reader 2 -> 3), so PostgreSQL says no.
    lean_paths: bool = True
    #: A hot standby (PostgreSQL in recovery, reached because the URL asked for
    #: one): it answers reads, possibly behind its primary, and takes no change.
    read_only: bool = False

    def read(self) -> AbstractContextManager[Transaction]:
        """A read-only transaction that sees one consistent snapshot."""
        ...

    def peek(self) -> AbstractContextManager[Transaction]:
        """No transaction: each statement is atomic on its own.

        The cheapest way to do a point read that needs no snapshot across
        statements.  It never makes a change (no change number, no audit
        line); the one statement through it that writes is a read's
        ``touch_if``, which notes the reader in lastAccessedBy.
        """
        ...

    def peek_entry(self, agent_id: str, key: str, now_us: int) -> tuple[Any, ...] | None:
        """:meth:`Transaction.read_entry` through :meth:`peek`: the lean read's one
        statement (a backend may run it with less ceremony than a context manager)."""
        ...

    def retention_of(self, stored: Any) -> RetentionPolicy:
        """A stored, non-null retention policy (as :meth:`peek_entry` and
        :meth:`Transaction.iter_newest_rows` give it) decoded; raises on one
        that is not a policy."""
        ...

    def write(self, agent_id: str | None) -> AbstractContextManager[Transaction]:
        """A read-write transaction holding ``agent_id`` exclusively (SQLite from
        the start; PostgreSQL from its first statement, which travels with the
        lock -- see :meth:`Transaction.lookup_holding`).

        Commits when the block exits normally, rolls back on an exception.
        Backend failures surface as MEMORY_STORAGE_ERROR.
        """
        ...

    def long_running(self) -> AbstractContextManager[None]:
        """Transactions this thread begins inside the block may run long.

        A memory call is bounded as a whole (PostgreSQL: ``rotifer_timeout``);
        a deployer's move, export or import holds one transaction for as many
        statements as the agent has entries, so inside this block each
        statement is bounded instead.
        """
        ...

    def close(self) -> None: ...
