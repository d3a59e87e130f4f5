"""Reading an agent's entries under a key prefix until a caller has what it
wants: the page an integration needs, without a query's limit of 1000 entries
and 4 MiB.

:func:`pick_newest` walks the live entries under a prefix newest first (the
query order), from one snapshot, hands each the caller may read to ``pick``,
and stops as soon as ``count`` of them were kept.  The rows are fetched in
pages of ``count`` doubling up to 256 (:meth:`Transaction.iter_newest`), so a
page of ten costs what ten rows cost when the first ten qualify, and the answer
is never a request the 4 MiB bound could refuse: it holds exactly what the
caller keeps.  ``pick`` runs inside the read (the backend's lock held): it must
not call the memory itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ..engine.changes import to_entry
from ..engine.core import Engine
from ..errors import invalid
from ..filters import check_prefix
from ..model import MemoryEntry
from ..storage.backend import NEWEST_PAGE, Row

T = TypeVar("T")


def pick_newest(store: Engine, agent_id: str, key_prefix: str,
                readable: Callable[[Row], bool], pick: Callable[[MemoryEntry], T | None],
                count: int | None) -> list[T]:
    """Up to ``count`` (``None``: no bound) non-``None`` answers of ``pick`` over
    the live entries whose key starts with ``key_prefix`` and that ``readable``
    lets through, newest first."""
    check_prefix(key_prefix)
    if count is not None and (not isinstance(count, int) or count < 0):
        raise invalid(f"count must be a whole number from 0, not {count!r}")
    kept: list[T] = []
    if count == 0:
        return kept
    store.purge_expired(agent_id)
    now = store.clock.now_us()
    first = NEWEST_PAGE if count is None else count
    with store.backend.read() as tx:
        for row in tx.iter_newest(agent_id, key_prefix=key_prefix or None, first=first):
            if (row.expires_us is not None and row.expires_us <= now) or not readable(row):
                continue
            answer = pick(to_entry(row))
            if answer is not None:
                kept.append(answer)
                if len(kept) == count:
                    break
    return kept
