"""Entries and agents to SQLite parameters and back: retention policies are
stored as JSON text (parsed once per distinct text); the rest is
:mod:`rotifer.memory.storage.rows`, shared with PostgreSQL."""

from __future__ import annotations

import functools
import json
from typing import Any

from ...model import RetentionPolicy
from ..backend import Row
from ..rows import decode_row, entry_params


def retention_to_text(policy: RetentionPolicy | None) -> str | None:
    return None if policy is None else json.dumps(policy.to_json(), separators=(",", ":"))


@functools.lru_cache(maxsize=256)
def parse_retention(text: str) -> RetentionPolicy:
    """Stored retention policies repeat; parse each text once (they are immutable)."""
    return RetentionPolicy.parse(json.loads(text))


def row_params(row: Row) -> tuple[Any, ...]:
    return entry_params(row, retention_to_text(row.retention))


#: A partial, not a wrapper function: a query decodes one row per entry.
make_row = functools.partial(decode_row, retention=parse_retention)
