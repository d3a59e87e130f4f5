"""Stored entries to SQL parameters and back, for both backends.

The two backends keep the same columns (``ROW_COLUMNS`` in
:mod:`rotifer.memory.storage.sql_text`) and differ only in how a retention policy is
stored (SQLite: JSON text; PostgreSQL: ``jsonb``), so each passes its own
retention conversion and everything else is written once here.

Rows are decoded defensively: a damaged or hand-edited store (an unknown
category or scope, a retention that is not a policy, a value stored as text)
is MEMORY_STORAGE_ERROR, never a ValueError escaping into a gene.  Decoding a
row is the hot path of every query: plain dict lookups instead of calling the
enums, and one shared ``AccessPolicy``/``DataPolicy`` per combination.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import AgentMemoryError, damaged
from ..model import AccessPolicy, Category, DataPolicy, RetentionPolicy, Scope, SharePolicy
from .backend import AgentRecord, Brief, Row, new_row

#: What decoding a damaged row raises (caught and reported as damage).
UNREADABLE = (ValueError, TypeError, KeyError, AgentMemoryError)
#: A stored category text -> its category, and a stored (read, write, share)
#: scope triple -> its one shared access policy: the decoders' tables, which
#: the lean paths and the Python bridge read too (one object per combination).
CATEGORIES: dict[object, Category] = {c.value: c for c in Category}
POLICIES: dict[tuple[str, str, str], AccessPolicy] = {}


def access_policy_of(read: str, write: str, share: str) -> AccessPolicy:
    key = (read, write, share)
    policy = POLICIES.get(key)
    if policy is None:
        policy = AccessPolicy(Scope(read), Scope(write), SharePolicy(share))
        if len(POLICIES) < 256:  # only valid combinations get here; there are 48
            POLICIES[key] = policy
    return policy


# Every valid combination, made once here: the lean paths (rotifer.memory.views.gene_reads)
# look policies up in this table and hand a miss to the full path, so without
# this the first read or query of each combination in a process would go the
# full way.
for _read in Scope:
    for _write in Scope:
        for _share in SharePolicy:
            access_policy_of(_read.value, _write.value, _share.value)


@functools.lru_cache(maxsize=256)
def _data_policy(max_retention_days: int | None, anonymization_supported: bool) -> DataPolicy:
    return DataPolicy(max_retention_days, anonymization_supported)


def _blob(value: object) -> bytes:
    if type(value) is bytes:
        return value
    if not isinstance(value, bytes | memoryview):
        raise TypeError(f"the value is stored as {type(value).__name__}, not as a BLOB")
    return bytes(value)


def entry_params(row: Row, retention: object) -> tuple[Any, ...]:
    """The row as parameters in ``PUT_COLUMNS`` order, its retention already
    converted to what the backend stores.

    The enums' texts are read as ``_value_`` (the member's own attribute)
    rather than ``.value`` (a Python-level property on every read: four of
    the five a write made, ~0.4 µs each under cProfile)."""
    access = row.access
    return (
        row.agent_id, row.key, row.category._value_, row.value, row.size, row.created_by,
        row.creator_domain, row.last_accessed_by, row.created_us, row.updated_us,
        access.read_scope._value_, access.write_scope._value_, access.share_policy._value_,
        retention, row.expires_us, row.seq,
    )


def decode_row(r: tuple[Any, ...], retention: Callable[[Any], RetentionPolicy]) -> Row:
    """A ``ROW_COLUMNS`` result row; ``retention`` parses a stored, non-null policy."""
    try:
        # Positional, in ROW_COLUMNS order: agent_id, key, category, value,
        # created_by, creator_domain, last_accessed_by, created_us, updated_us,
        # access, retention, expires_us, seq.
        return new_row(
            r[0], r[1], CATEGORIES[r[2]], _blob(r[3]), r[4], r[5], r[6], r[7], r[8],
            access_policy_of(r[9], r[10], r[11]), None if r[12] is None else retention(r[12]),
            r[13], r[14],
        )
    except UNREADABLE as exc:
        raise damaged(f"an entry {r[1]!r}", exc) from None


def decode_brief(r: tuple[Any, ...]) -> Brief:
    """A ``BRIEF_COLUMNS`` result row."""
    try:
        return Brief(r[0], CATEGORIES[r[1]], r[2], r[3], r[4], r[5])
    except UNREADABLE as exc:
        raise damaged(f"an entry {r[0]!r}", exc) from None


def decode_agent(r: tuple[Any, ...]) -> AgentRecord:
    """An ``AGENT_COLUMNS`` result row."""
    return AgentRecord(r[0], r[1], _data_policy(r[2], bool(r[3])), r[4], r[5], r[6], r[7], r[8])
