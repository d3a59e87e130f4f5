"""Entries and agents to SQLite parameters and back (cached policies, strict decoding)."""

from __future__ import annotations

import functools
import json
from typing import Any

from ..backend import (
    AgentRecord,
    Brief,
    Row,
    new_row,
)
from ..errors import MemoryError, damaged
from ..model import AccessPolicy, Category, DataPolicy, RetentionPolicy, Scope, SharePolicy


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
        return Brief(r[0], _CATEGORIES[r[1]], r[2], r[3], r[4], r[5])
    except _UNREADABLE as exc:
        raise damaged(f"an entry {r[0]!r}", exc) from None


def make_agent(r: tuple[Any, ...]) -> AgentRecord:
    return AgentRecord(r[0], r[1], _data_policy(r[2], bool(r[3])), r[4], r[5], r[6])


@functools.lru_cache(maxsize=256)
def _data_policy(max_retention_days: int | None, anonymization_supported: bool) -> DataPolicy:
    return DataPolicy(max_retention_days, anonymization_supported)


