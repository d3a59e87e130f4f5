"""The SQL text the SQLite and PostgreSQL backends share.

Both keep the same tables; only the parameter placeholder differs (``?`` or
``%s``), so each statement is built here from the placeholder.
:mod:`rotifer.memory.storage.rows` decodes result rows in these column orders
(:mod:`rotifer.memory.storage.sql_transaction` names their positions and runs the
statements; :mod:`rotifer.memory.storage.backend` is the interface they serve).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ..model import Category
from .backend import NEWEST_PAGE

#: An entry's columns, in the order every entry row comes back in.
ROW_NAMES = ("agent_id", "key", "category", "value", "created_by", "creator_domain",
             "last_accessed_by", "created_us", "updated_us", "read_scope", "write_scope",
             "share_policy", "retention", "expires_us", "seq")
ROW_COLUMNS = ", ".join(ROW_NAMES)
#: What a put writes: the entry's columns with its ``size`` after the value.
PUT_COLUMNS = ", ".join(n for name in ROW_NAMES
                        for n in ((name, "size") if name == "value" else (name,)))
BRIEF_COLUMNS = "key, category, size, updated_us, seq, created_by"
AGENT_COLUMNS = (
    "agent_id, quota_bytes, max_retention_days, anonymization_supported, used_bytes, next_seq, "
    "last_us, epoch, head"
)
#: Where the entry's columns start in a :func:`lookup_sql` result row.
LOOKUP_ROW_AT = len(AGENT_COLUMNS.split(", ")) + 1


def put_sql(placeholder: str) -> str:
    """Insert an entry, or update it in place (an upsert, not a delete and insert:
    replacing a row rewrites every index entry and a large value's overflow pages).
    Parameters: :data:`PUT_COLUMNS` in order."""
    columns = PUT_COLUMNS.split(", ")
    return (f"INSERT INTO memory_entries ({PUT_COLUMNS}) "
            f"VALUES ({', '.join([placeholder] * len(columns))}) "
            "ON CONFLICT (agent_id, key) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in columns[2:]))


def lookup_sql(placeholder: str) -> str:
    """The agent, "has anything expired?" (the partial expiry index) and the entry
    (the unique index) in one statement instead of three on every call.
    Parameters: now (microseconds), key, agent id."""
    return ("SELECT " + ", ".join(f"a.{c}" for c in AGENT_COLUMNS.split(", "))
            + ", EXISTS (SELECT 1 FROM memory_entries x WHERE x.agent_id = a.agent_id "
            f"AND x.expires_us IS NOT NULL AND x.expires_us <= {placeholder}), "
            + ", ".join(f"e.{c}" for c in ROW_COLUMNS.split(", "))
            + " FROM memory_agents a LEFT JOIN memory_entries e ON e.agent_id = a.agent_id "
            f"AND e.key = {placeholder} WHERE a.agent_id = {placeholder}")


#: What a read's entry needs of the stored row (the lean read, :func:`read_sql`):
#: not the agent id and key it was asked with, nor what only writes and queries use.
READ_COLUMNS = ("category, value, created_by, creator_domain, last_accessed_by, created_us, "
                "updated_us, read_scope, write_scope, share_policy, retention")


def read_sql(placeholder: str) -> str:
    """:func:`lookup_sql` for a read that changes nothing: "has anything expired?"
    and the entry's :data:`READ_COLUMNS` (all null: no such entry), none of the
    agent's -- one row converted to Python with 12 values instead of 25.  The
    same join, indexes and parameters: now (microseconds), key, agent id; no row:
    no such agent."""
    return ("SELECT EXISTS (SELECT 1 FROM memory_entries x WHERE x.agent_id = a.agent_id "
            f"AND x.expires_us IS NOT NULL AND x.expires_us <= {placeholder}), "
            + ", ".join(f"e.{c}" for c in READ_COLUMNS.split(", "))
            + " FROM memory_agents a LEFT JOIN memory_entries e ON e.agent_id = a.agent_id "
            f"AND e.key = {placeholder} WHERE a.agent_id = {placeholder}")


def entry_filters(placeholder: str, agent_id: str, category: Category | None,
                  key_prefix: str | None) -> tuple[list[str], list[Any]]:
    """The conditions (and parameters) for one agent's entries of a category and
    a key prefix.  ``key_prefix`` becomes the range ``[prefix,
    prefix_upper_bound(prefix))``: the key columns compare byte for byte
    (SQLite's default, PostgreSQL's ``COLLATE "C"``), so this is exact and uses
    the index, never ``LIKE``."""
    where = [f"agent_id = {placeholder}"]
    params: list[Any] = [agent_id]
    if category is not None:
        where.append(f"category = {placeholder}")
        params.append(category.value)
    if key_prefix:
        where.append(f"key >= {placeholder}")
        params.append(key_prefix)
        upper = prefix_upper_bound(key_prefix)
        if upper is not None:
            where.append(f"key < {placeholder}")
            params.append(upper)
    return where, params


def newest_sql(placeholder: str, agent_id: str, category: Category | None,
               key_prefix: str | None, since_us: int | None, until_us: int | None,
               *, columns: str = ROW_COLUMNS) -> tuple[str, tuple[Any, ...]]:
    """``iter_newest``'s query and parameters, most recently updated first, with an
    ``{after}`` slot for the next page's condition and a ``{limit}`` slot; it
    selects ``columns`` (the entry's, or e.g. only its ``rowid``).

    ``key_prefix`` becomes the range ``[prefix, prefix_upper_bound(prefix))``:
    the key columns compare byte for byte (SQLite's default, PostgreSQL's
    ``COLLATE "C"``), so this is exact and uses the index, never ``LIKE``."""
    where, params = entry_filters(placeholder, agent_id, category, key_prefix)
    if since_us is not None:
        where.append(f"updated_us >= {placeholder}")
        params.append(since_us)
    if until_us is not None:
        where.append(f"updated_us < {placeholder}")
        params.append(until_us)
    sql = (f"SELECT {columns} FROM memory_entries WHERE {' AND '.join(where)} {{after}} "
           "ORDER BY updated_us DESC, seq DESC LIMIT {limit}")
    return sql, tuple(params)


#: The deployer's listing orders (:mod:`rotifer.memory.views.browse`), each total.
BROWSE_ORDERS = {"newest": "updated_us DESC, seq DESC", "oldest": "updated_us, seq",
                 "size": "size DESC, key"}


def browse_sql(placeholder: str, contains_sql: str, agent_id: str, *,
               category: Category | None, key_prefix: str | None, creator: str | None,
               contains: str | None, sort: str, after: tuple[int, ...] | None, limit: int
               ) -> tuple[str, tuple[Any, ...]]:
    """One page of the deployer's listing: :data:`ROW_COLUMNS` with an empty value
    (the value never leaves the database) followed by ``size``.

    ``contains`` is matched by ``contains_sql`` (the backend's substring test on
    ``lower(key)``, which folds ASCII letters only on both backends) against
    the needle lowered the same way; ``after`` is the last row's ``(updated_us,
    seq)`` for the two time orders, or ``(offset,)`` for ``size``."""
    p = placeholder
    where, params = entry_filters(p, agent_id, category, key_prefix)
    params.insert(0, b"")  # the empty value the SELECT list shows instead of the value
    if creator is not None:
        where.append(f"created_by = {p}")
        params.append(creator)
    if contains:
        where.append(contains_sql)
        params.append(ascii_lower(contains))
    offset = ""
    if after is not None and sort == "size":
        offset = f" OFFSET {int(after[0])}"
    elif after is not None:
        where.append(f"(updated_us, seq) {'<' if sort == 'newest' else '>'} ({p}, {p})")
        params += list(after)
    columns = ", ".join(p if name == "value" else name for name in ROW_NAMES)
    sql = (f"SELECT {columns}, size FROM memory_entries WHERE {' AND '.join(where)} "
           f"ORDER BY {BROWSE_ORDERS[sort]} LIMIT {int(limit)}{offset}")
    return sql, tuple(params)


def category_usage_sql(placeholder: str) -> str:
    """Entries and bytes per category of one agent (parameter: the agent id)."""
    return ("SELECT category, count(*), coalesce(sum(size), 0) FROM memory_entries "
            f"WHERE agent_id = {placeholder} GROUP BY category")


def ascii_lower(text: str) -> str:
    """``text`` with A-Z lowered and nothing else: what SQL ``lower()`` does to a key
    on both backends (SQLite's built-in, PostgreSQL's under ``COLLATE "C"``)."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


#: The first page of the cleanup and expiry scans (they double from there up to
#: :data:`NEWEST_PAGE`), so evicting one entry does not decode 256 candidates.
FIRST_PAGE = 16


def expired_sql(placeholder: str) -> tuple[str, str]:
    """``iter_expired``'s paged query (``expires_us`` then :data:`BRIEF_COLUMNS`),
    soonest expiry first, and its next-page condition.  Parameters: agent id, now."""
    p = placeholder
    return (f"SELECT expires_us, {BRIEF_COLUMNS} FROM memory_entries WHERE agent_id = {p} "
            f"AND expires_us IS NOT NULL AND expires_us <= {p} {{after}} "
            "ORDER BY expires_us, seq LIMIT {limit}", f"AND (expires_us, seq) > ({p}, {p})")


def oldest_sql(placeholder: str) -> tuple[str, str]:
    """``iter_oldest``'s paged query (:data:`BRIEF_COLUMNS`), least recently
    updated first, and its next-page condition.  Parameters: agent id, category."""
    p = placeholder
    return (f"SELECT {BRIEF_COLUMNS} FROM memory_entries WHERE agent_id = {p} "
            f"AND category = {p} {{after}} ORDER BY updated_us, seq LIMIT {{limit}}",
            f"AND (updated_us, seq) > ({p}, {p})")


def newest_after(placeholder: str) -> str:
    """The next-page condition of :func:`newest_sql`'s query."""
    return f"AND (updated_us, seq) < ({placeholder}, {placeholder})"


def pages(fetch: Callable[[str, tuple[Any, ...]], Sequence[tuple[Any, ...]]], sql: str,
          params: tuple[Any, ...], after_sql: str, after_of: Callable[[tuple[Any, ...]],
                                                                    tuple[Any, ...]],
          first: int = NEWEST_PAGE) -> Iterator[tuple[Any, ...]]:
    """Keyset pagination over ``sql`` (with ``{after}`` and ``{limit}`` slots),
    each page fetched whole by ``fetch``, so the caller may write between pages
    without disturbing an open cursor.  Pages start at ``first`` rows and double
    up to :data:`NEWEST_PAGE`, so a caller that usually wants a few rows
    (cleanup: the oldest one or two) fetches few."""
    after: tuple[Any, ...] = ()
    size = first
    while True:
        rows = fetch(sql.format(after=after_sql if after else "", limit=size), params + after)
        yield from rows
        if len(rows) < size:
            return
        after = after_of(rows[-1])
        size = min(2 * size, NEWEST_PAGE)


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string greater than every string starting with ``prefix``.

    Used to turn a plain prefix into an indexable range ``[prefix, bound)``
    without LIKE, so ``%`` and ``_`` stay ordinary characters.  ``None`` means
    no upper bound (the prefix is all U+10FFFF).
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last == 0x10FFFF:
            continue
        nxt = last + 1
        if 0xD800 <= nxt <= 0xDFFF:  # surrogates never occur in stored keys
            nxt = 0xE000
        return "".join(chars) + chr(nxt)
    return None
