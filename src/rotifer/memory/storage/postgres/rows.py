"""Rows as PostgreSQL sends and takes them: entries, briefs, agents.

Kept apart from :mod:`.transaction` (which statements run, and when) so that
the decoding of a result row is written once for every statement that
returns one.  Only the retention policy differs from SQLite (``jsonb``); the
rest is :mod:`rotifer.memory.storage.rows`.
"""

from __future__ import annotations

import functools
from typing import Any

from psycopg.types.json import Jsonb

from ...model import RetentionPolicy
from ..backend import Row
from ..rows import decode_row, entry_params


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
    return entry_params(row, _retention_param(row.retention))


#: A partial, not a wrapper function: a query decodes one row per entry.
make_row = functools.partial(decode_row, retention=RetentionPolicy.parse)  # jsonb arrives parsed
