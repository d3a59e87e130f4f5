"""Rows as PostgreSQL sends and takes them: entries, briefs, agents.

Kept apart from :mod:`.transaction` (which statements run, and when) so that
the decoding of a result row is written once for every statement that
returns one.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from ..backend import AgentRecord, Brief, Row
from ..errors import MemoryError, damaged
from ..model import AccessPolicy, Category, DataPolicy, RetentionPolicy, Scope, SharePolicy


def storable(text: str) -> bool:
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
