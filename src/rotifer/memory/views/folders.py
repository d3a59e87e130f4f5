"""The distinct "folders" under a key prefix, one entry each.

A folder is a key up to and including its last ``/`` (``a/b/`` for ``a/b/k``;
``""`` for a key without one).  The LangGraph store keeps an item's namespace
as its key's folder, so listing namespaces is listing folders -- and that needs
one entry per folder, not every entry.  :func:`pick_folders` asks the database
for the distinct folders under a prefix with the smallest key of each -- from
the key index alone (it covers the query: no entry's row or value is read),
one answer row per folder -- then reads those sample entries (one statement
per 500 keys) and hands each that is live and that the caller may read to
``pick``.  Only a folder whose sample does not do (expired since the purge,
another gene's entry the caller may not read, or one ``pick`` turns down) has
its other entries read, newest first, until one is taken.  All from one
snapshot.  The folder is computed in SQL the same way on both backends:
``rtrim(key, replace(key, '/', ''))`` strips every trailing character that is
not ``/``.  It is still a walk over every key under the prefix, in the
database (as SqliteStore's ``SELECT DISTINCT prefix`` walks its index), at
about half a microsecond a key (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..engine.changes import to_entry
from ..filters import check_prefix
from ..model import MemoryEntry
from ..policy import scope_allows
from ..storage.backend import Row, Transaction
from ..storage.sql_text import entry_filters
from ..storage.sql_transaction import SqlTransaction
from .many import rows_of

if TYPE_CHECKING:
    from ..engine.core import Engine
    from .deployer_memory import DeployerMemory
    from .gene_memory import GeneMemory

T = TypeVar("T")

FOLDER = "rtrim(key, replace(key, '/', ''))"


def gene_folders(memory: GeneMemory, key_prefix: str,
                 pick: Callable[[MemoryEntry], T | None]) -> dict[str, T]:
    """:func:`pick_folders` over what the gene may read (as its ``query_memory``)."""
    actor = memory._require_actor("query")
    return pick_folders(memory.store, memory.agent_id, key_prefix, lambda row: scope_allows(
        row.access.read_scope, actor, row.created_by, row.creator_domain), pick)


def deployer_folders(memory: DeployerMemory, key_prefix: str,
                     pick: Callable[[MemoryEntry], T | None]) -> dict[str, T]:
    """:func:`pick_folders` over every entry (the owner reads everything)."""
    return pick_folders(memory.store, memory.agent_id, key_prefix, lambda row: True, pick)


def pick_folders(store: Engine, agent_id: str, key_prefix: str,
                 readable: Callable[[Row], bool], pick: Callable[[MemoryEntry], T | None]
                 ) -> dict[str, T]:
    """Each folder under ``key_prefix`` holding a live entry that ``readable``
    lets through and ``pick`` answers for, with that answer (the folder's
    smallest key tried first)."""
    check_prefix(key_prefix)
    store.purge_expired(agent_id)
    now = store.clock.now_us()
    found: dict[str, T] = {}
    refused: set[str] = set()
    with store.backend.read() as tx:
        samples = _samples(tx, agent_id, key_prefix, now)
        rows = rows_of(tx, agent_id, [key for _, key in samples])
        for folder, key in samples:
            row = rows.get(key)
            if folder in found or row is None:
                continue
            if (row.expires_us is not None and row.expires_us <= now) or not readable(row):
                refused.add(folder)
                continue
            answer = pick(to_entry(row))
            if answer is None:
                refused.add(folder)
            else:
                found[folder] = answer
        for folder in sorted(refused - found.keys()):
            answer = _first(tx, agent_id, folder, now, readable, pick)
            if answer is not None:
                found[folder] = answer
    return found


def _samples(tx: Transaction, agent_id: str, key_prefix: str, now: int
             ) -> list[tuple[str, str]]:
    """(folder, smallest key) per folder: the key index alone answers it."""
    if not isinstance(tx, SqlTransaction):  # pragma: no cover - every backend is SQL
        keys = sorted(row.key for row in tx.iter_newest(agent_id, key_prefix=key_prefix or None))
        return sorted({key[:key.rfind("/") + 1]: key for key in reversed(keys)}.items())
    if key_prefix and tx.checks_text and not tx._storable(key_prefix):
        return []
    p = tx.sql.placeholder
    where, params = entry_filters(p, agent_id, None, key_prefix or None)
    sql = (f"SELECT {FOLDER}, min(key) FROM memory_entries WHERE {' AND '.join(where)} "
           f"GROUP BY {FOLDER}")
    answer: list[tuple[Any, ...]] = tx._all(sql, tuple(params))
    return sorted((str(folder), str(key)) for folder, key in answer)


def _first(tx: Transaction, agent_id: str, folder: str, now: int,
           readable: Callable[[Row], bool], pick: Callable[[MemoryEntry], T | None]
           ) -> T | None:
    """The first answer of ``pick`` over the folder's own entries (not those of
    folders inside it), newest first."""
    for row in tx.iter_newest(agent_id, key_prefix=folder or None):
        if "/" in row.key[len(folder):] or not row.key.startswith(folder):
            continue
        if (row.expires_us is not None and row.expires_us <= now) or not readable(row):
            continue
        answer = pick(to_entry(row))
        if answer is not None:
            return answer
    return None
