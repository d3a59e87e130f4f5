"""The deployer's paged look at an agent's memory, for a console or a report.

``DeployerMemory.list`` hands back every entry; a page that shows 50 of an
agent's 100,000 entries must not read them all.  These functions read through
the backend interface (``Transaction.browse`` and ``category_usage``, one
statement each, whose SQL is :func:`~rotifer.memory.storage.sql_text.browse_sql`,
written once for both backends), and never return a value: values do not
leave the database, and an :class:`EntryInfo` has no value field at all, so
nothing built on it can show one.

What each costs, on an agent of N entries:

* :func:`list_page` sorted ``newest`` (the default) or ``oldest``, filtered by
  category and key prefix: one page of an index (keyset paging, the cursor is
  the last row's ``(updatedAt, seq)``), whatever N is.  The ``creator`` and
  ``contains`` filters and the ``size`` order are done by the database over
  the agent's rows (no index of their own; tens of milliseconds at 100,000:
  docs/benchmarks.md); ``size`` pages by offset.  ``contains`` ignores the case
  of ASCII letters only (what SQL ``lower()`` does on both backends).
* :func:`usage_by_category`: one ``GROUP BY`` over the agent's rows.
* :func:`next_evictions`: the first few of the cleanup order (CACHE, then
  PATTERN, then CONTEXT, each least recently updated first) -- a few rows.
* :func:`describe_keys`: one point read per key.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..clock import MICROS_PER_DAY, format_time
from ..engine.core import Engine
from ..errors import invalid
from ..model import EVICTION_ORDER, AccessPolicy, Category, RetentionPolicy, check_key
from ..storage.backend import Brief, Row, Transaction

Sort = Literal["newest", "oldest", "size"]
SORTS: tuple[Sort, ...] = ("newest", "oldest", "size")
#: The largest page :func:`list_page` returns.
MAX_PAGE = 500


@dataclass(frozen=True, slots=True)
class EntryInfo:
    """One entry as the deployer sees it: everything but the value."""

    key: str
    category: Category
    size: int
    created_by: str
    creator_domain: str | None
    last_accessed_by: str
    created_us: int
    updated_us: int
    access: AccessPolicy
    retention: RetentionPolicy | None
    expires_us: int | None
    seq: int

    @classmethod
    def of(cls, row: Row, size: int | None = None) -> EntryInfo:
        return cls(row.key, row.category, row.size if size is None else size, row.created_by,
                   row.creator_domain,
                   row.last_accessed_by, row.created_us, row.updated_us, row.access,
                   row.retention, row.expires_us, row.seq)

    @property
    def created_at(self) -> str:
        return format_time(self.created_us)

    @property
    def updated_at(self) -> str:
        return format_time(self.updated_us)

    @property
    def expires_at(self) -> str | None:
        return None if self.expires_us is None else format_time(self.expires_us)

    def expires_within(self, now_us: int, micros: int = MICROS_PER_DAY) -> bool:
        return self.expires_us is not None and self.expires_us <= now_us + micros

    @property
    def unbounded_preference(self) -> bool:
        """A PREFERENCE kept forever: the poisoning risk the specification warns
        about (a planted preference steers every later run)."""
        return self.category is Category.PREFERENCE and self.expires_us is None


@dataclass(frozen=True, slots=True)
class Page:
    """One page of :func:`list_page`; ``cursor`` fetches the next (``None``: last page)."""

    entries: list[EntryInfo]
    cursor: str | None


@dataclass(frozen=True, slots=True)
class CategoryUsage:
    count: int
    bytes: int


def list_page(store: Engine, agent_id: str, *, category: Category | None = None,
              key_prefix: str | None = None, creator: str | None = None,
              contains: str | None = None, sort: Sort = "newest", limit: int = 50,
              cursor: str | None = None) -> Page:
    """A page of ``agent_id``'s live entries (expired ones are purged first, as
    ``DeployerMemory.list`` does).  ``creator`` is a gene's v2 id; ``contains``
    matches keys ignoring case; ``cursor`` is a previous page's ``cursor``."""
    if sort not in SORTS:
        raise invalid(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    if not 1 <= limit <= MAX_PAGE:
        raise invalid(f"a page holds 1 to {MAX_PAGE} entries, not {limit}")
    after = _parse_cursor(cursor, sort)
    store.purge_expired(agent_id)
    with store.backend.peek() as tx:  # one statement: one snapshot
        found = tx.browse(agent_id, category=category, key_prefix=key_prefix or None,
                          creator=creator, contains=contains or None, sort=sort, after=after,
                          limit=limit + 1)
    got = [EntryInfo.of(row, size) for row, size in found]
    more = len(got) > limit
    page = got[:limit]
    if not more:
        return Page(page, None)
    last = page[-1]
    next_cursor = f"{len(page) + (after[0] if after else 0)}" if sort == "size" else \
        f"{last.updated_us}.{last.seq}"
    return Page(page, next_cursor)


def _parse_cursor(cursor: str | None, sort: Sort) -> tuple[int, ...] | None:
    if not cursor:
        return None
    parts = cursor.split(".")
    if len(parts) == (1 if sort == "size" else 2) and all(p.isdigit() and len(p) < 20
                                                          for p in parts):
        return tuple(int(p) for p in parts)
    raise invalid(f"not a page cursor for sort {sort}: {cursor[:40]!r}")


def _infos(tx: Transaction, agent_id: str, keys: Iterable[str]) -> list[EntryInfo]:
    """The entries with these keys that exist (one point read each)."""
    out = []
    for key in keys:
        row = tx.get(agent_id, key)
        if row is not None:
            out.append(EntryInfo.of(row))
    return out


def usage_by_category(store: Engine, agent_id: str) -> dict[Category, CategoryUsage]:
    """Entries and bytes per category (every category present, zero if empty), in
    one statement, so the parts add up to the agent's total."""
    with store.backend.peek() as tx:
        found = tx.category_usage(agent_id)
    return {c: CategoryUsage(*found.get(c, (0, 0))) for c in Category}


def next_evictions(store: Engine, agent_id: str, limit: int = 10) -> list[Brief]:
    """The first ``limit`` entries of the cleanup order: what an over-quota write
    would evict first (as many of them as it needs bytes).  PREFERENCE is never evicted."""
    with store.backend.read() as tx:
        walk = (b for c in EVICTION_ORDER for b in tx.iter_oldest(agent_id, c))
        return list(itertools.islice(walk, limit))


def expiring_count(store: Engine, agent_id: str, within_us: int = MICROS_PER_DAY,
                   most: int = 1000) -> int:
    """How many entries expire within ``within_us`` from now (counted up to ``most``)."""
    now = store.clock.now_us()
    with store.backend.read() as tx:
        return sum(1 for _ in itertools.islice(tx.iter_expired(agent_id, now + within_us),
                                               most))


def describe_keys(store: Engine, agent_id: str, keys: Sequence[str]) -> list[EntryInfo]:
    """The entries with these keys that exist (in the order given, each once),
    for a confirmation that says how many entries and bytes a deletion removes."""
    for key in keys:
        check_key(key)
    store.purge_expired(agent_id)
    with store.backend.read() as tx:
        return _infos(tx, agent_id, dict.fromkeys(keys))
