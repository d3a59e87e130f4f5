"""The history index's table as storage sees it: its columns, a row as the
backends hand it back, and the reading statements both SQL backends run
(with their own placeholder).  What the rows mean, and how they are made
from the lines of the log, is :mod:`rotifer.memory.audit.index`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..audit.actions import (
    CATEGORY_CODES,
    CHART_ACTIONS,
    ENDED,
    ENDS,
    REMOVE_ACTIONS,
    REMOVED,
    SETS,
    UNKNOWN,
)

#: The columns a reader gets, in this order (:class:`~rotifer.memory.audit.index.Entry`).
ENTRY_COLUMNS = ("file_no, off, len, seq, epoch, ts_us, action, key_hash, category, nbytes, "
                 "digest")

#: A row as the backends return it: the :data:`ENTRY_COLUMNS` as a plain tuple.
#: A history of 100,000 lines is 100,000 rows, and making each an
#: :class:`~rotifer.memory.audit.index.Entry` costs more than fetching it, so
#: the passes over all of them read positions, and only the rows whose lines
#: are read become entries.
IndexRow = tuple[Any, ...]


def _literal(word: str) -> str:
    """An action or category name as an SQL string (they are fixed words)."""
    assert word.replace("_", "").isalpha(), word
    return f"'{word}'"


#: :func:`~rotifer.memory.audit.actions.step_code` in SQL, over the ``action``
#: and ``category`` columns.
STEP_CODE_SQL = (
    "CASE WHEN action IN (" + ", ".join(_literal(a) for a in sorted(SETS)) + ") THEN "
    "(CASE category " + " ".join(f"WHEN {_literal(c)} THEN {n}"
                                 for c, n in CATEGORY_CODES.items())
    + f" ELSE {UNKNOWN} END) WHEN action IN ("
    + ", ".join(_literal(a) for a in sorted(ENDS)) + f") THEN {ENDED} ELSE (CASE action "
    + " ".join(f"WHEN {_literal(a)} THEN {REMOVED + i}" for i, a in enumerate(REMOVE_ACTIONS))
    + " END) END")


class IndexSql(NamedTuple):
    """The reading statements, with one backend's placeholder ``p``."""

    #: Per epoch of the agent: the newest committed change's number, the newest number.
    summary: str
    #: The rows of one action, in log order.
    of_action: str
    #: Rows before a place, newest first: in a time window, without an action (``""``:
    #: none left out), of a key's hash unless the flag says any key; at most N.
    page: str
    #: What the chart needs of the rows of
    #: :data:`~rotifer.memory.audit.actions.CHART_ACTIONS`, in log order: time,
    #: :func:`~rotifer.memory.audit.actions.step_code`, key hash, bytes.
    steps: str
    #: The newest numbered row's number that is not a ``rolled_back`` line (read
    #: from the end: it is almost always the last row).
    last: str

    @classmethod
    def using(cls, p: str) -> IndexSql:
        table = "memory_audit_index WHERE agent_id = " + p
        return cls(
            f"SELECT epoch, max(CASE WHEN action <> {p} THEN seq END), max(seq) FROM {table} "
            "AND seq IS NOT NULL GROUP BY epoch",
            f"SELECT {ENTRY_COLUMNS} FROM {table} AND action = {p} ORDER BY file_no, off",
            f"SELECT {ENTRY_COLUMNS} FROM {table} AND (file_no < {p} OR (file_no = {p} AND "
            f"off < {p})) AND ts_us >= {p} AND ts_us < {p} AND action <> {p} AND "
            f"({p} OR key_hash = {p}) "
            f"ORDER BY file_no DESC, off DESC LIMIT {p}",
            f"SELECT ts_us, {STEP_CODE_SQL}, key_hash, nbytes FROM {table} AND action IN ("
            + ", ".join([p] * len(CHART_ACTIONS)) + ") ORDER BY file_no, off",
            f"SELECT seq FROM {table} AND seq IS NOT NULL AND action <> {p} "
            "ORDER BY file_no DESC, off DESC LIMIT 1")

