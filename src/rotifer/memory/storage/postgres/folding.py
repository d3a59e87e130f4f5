"""Queued writes folded into as few statements as they can be.

A change's writes whose results nothing reads (the entry's upsert, its audit
row, its history-index row, the agent's counters) wait in the transaction's
queue (:mod:`.transaction`) and go out together; writes to distinct tables
travel as **one** data-modifying ``WITH``, because both the client's and the
server's work is per statement.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, Final

from .pipeline import Statement

#: The table a queued write changes: every queued statement starts with one of these.
_WRITE_TARGET: Final = re.compile(r"(?:INSERT INTO|UPDATE|DELETE FROM) (\w+)")


@lru_cache(maxsize=64)
def _target(sql: str) -> str:
    m = _WRITE_TARGET.match(sql)
    assert m is not None, f"not a queued write: {sql[:40]}"
    return m[1]


@lru_cache(maxsize=64)
def _with(texts: tuple[str, ...]) -> str:
    *first, last = texts
    return "WITH " + ", ".join(f"w{i} AS ({t})" for i, t in enumerate(first)) + " " + last


def folded(queue: Sequence[Statement]) -> list[Statement]:
    """Queued writes as few statements as they can be: each run of writes to
    distinct tables becomes one data-modifying ``WITH`` (the upsert, the audit
    rows, the index rows and the counters of a change: one statement).

    The same effects as running them in order: the sub-statements of a
    ``WITH`` share one snapshot and none sees another's changes, which only
    matters when two of them touch one table -- so a write to a table already
    in the run starts the next statement -- or when one reads a table another
    changes, which no queued write does (each changes its own table by key, or
    inserts given values).  Foreign keys are checked at the statement's end,
    after all of it; any sub-statement failing fails the statement, as one
    failing in a pipeline ends it."""
    out: list[Statement] = []
    run: list[Statement] = []
    tables: set[str] = set()
    for statement in queue:
        table = _target(statement[0])
        if table in tables:
            out.append(_fold(run))
            run, tables = [], set()
        run.append(statement)
        tables.add(table)
    if run:
        out.append(_fold(run))
    return out


def _fold(run: list[Statement]) -> Statement:
    if len(run) == 1:
        return run[0]
    params: tuple[Any, ...] = ()
    for _, p in run:
        if p:
            params += p
    return _with(tuple(sql for sql, _ in run)), params
